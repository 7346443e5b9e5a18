// The login page (e-mail and password; teachers set students' passwords or students log in
// with the password they set).
import { type FormEvent, useState } from "react";
import { useTranslation } from "react-i18next";
import { Navigate, useNavigate } from "react-router";
import { isStaff, useAuth } from "./auth";
import { ErrorBox } from "./components/common";
import { LanguageSwitch } from "./components/Layout";

export function Login() {
  const { t } = useTranslation();
  const { me, login } = useAuth();
  const navigate = useNavigate();
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  if (me) return <Navigate to={isStaff(me) ? "/teach" : "/sessions"} replace />;

  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const who = await login(email, password);
      navigate(isStaff(who) ? "/teach" : "/sessions");
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }

  return (
    <main id="main" className="login">
      <div className="login-card">
        <div className="login-head">
          <h1>agentica</h1>
          <LanguageSwitch />
        </div>
        <p className="muted">{t("login.lead")}</p>
        <form onSubmit={(event) => void submit(event)}>
          <label>
            {t("login.email")}
            <input
              type="email"
              autoComplete="username"
              required
              value={email}
              onChange={(event) => setEmail(event.target.value)}
            />
          </label>
          <label>
            {t("login.password")}
            <input
              type="password"
              autoComplete="current-password"
              required
              value={password}
              onChange={(event) => setPassword(event.target.value)}
            />
          </label>
          <ErrorBox error={error} />
          <button type="submit" disabled={busy}>
            {t("login.submit")}
          </button>
        </form>
      </div>
    </main>
  );
}
