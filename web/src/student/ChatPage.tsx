// Placeholder: written with the student view.
export function ChatPage() {
  return <p>ChatPage</p>;
}
