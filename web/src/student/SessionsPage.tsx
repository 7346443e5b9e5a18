// Placeholder: written with the student view.
export function SessionsPage() {
  return <p>SessionsPage</p>;
}
