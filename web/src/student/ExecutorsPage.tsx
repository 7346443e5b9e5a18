// Placeholder: written with the student view.
export function ExecutorsPage() {
  return <p>ExecutorsPage</p>;
}
