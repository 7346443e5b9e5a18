// The routes. Students: sessions (chat), executors, account. Teachers also get /teach (their
// courses: roster, usage, live activity, audit, settings), loaded as a separate chunk so a
// student's first load carries no chart library.
import { lazy, type ReactNode, Suspense } from "react";
import { Navigate, Route, Routes } from "react-router";
import { isStaff, useAuth } from "./auth";
import { Loading } from "./components/common";
import { Layout } from "./components/Layout";
import { Login } from "./Login";
import { AccountPage } from "./student/AccountPage";
import { ChatPage } from "./student/ChatPage";
import { ExecutorsPage } from "./student/ExecutorsPage";
import { SessionsPage } from "./student/SessionsPage";

const TeacherRoutes = lazy(() => import("./teacher/TeacherRoutes"));

function RequireLogin({ children }: { children: ReactNode }) {
  const { me, loading } = useAuth();
  if (loading) return <Loading />;
  if (!me) return <Navigate to="/login" replace />;
  return children;
}

function Home() {
  const { me } = useAuth();
  return <Navigate to={isStaff(me) ? "/teach" : "/sessions"} replace />;
}

export function App() {
  return (
    <Routes>
      <Route path="/login" element={<Login />} />
      <Route
        element={
          <RequireLogin>
            <Layout />
          </RequireLogin>
        }
      >
        <Route index element={<Home />} />
        <Route path="sessions" element={<SessionsPage />} />
        <Route path="sessions/:sessionId" element={<ChatPage />} />
        <Route path="executors" element={<ExecutorsPage />} />
        <Route path="account" element={<AccountPage />} />
        <Route
          path="teach/*"
          element={
            <Suspense fallback={<Loading />}>
              <TeacherRoutes />
            </Suspense>
          }
        />
        <Route path="*" element={<Navigate to="/" replace />} />
      </Route>
    </Routes>
  );
}
