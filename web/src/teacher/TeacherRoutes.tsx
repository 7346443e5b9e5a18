// Placeholder: written with the teacher view.
export default function TeacherRoutes() {
  return <p>teacher</p>;
}
