// Placeholder: written with the student view.
export function AccountPage() {
  return <p>AccountPage</p>;
}
