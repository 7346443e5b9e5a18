// The login page: e-mail and password, or e-mail and the token (agt_...) a teacher handed out
// when they added the student (a student's first login; they can set a password afterwards).
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
  const [withToken, setWithToken] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  if (me) return <Navigate to={isStaff(me) ? "/teach" : "/sessions"} replace />;

  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const who = await login(email, withToken ? { token: password.trim() } : { password });
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
            {withToken ? t("login.token") : t("login.password")}
            <input
              type="password"
              autoComplete={withToken ? "off" : "current-password"}
              required
              value={password}
              placeholder={withToken ? "agt_…" : undefined}
              onChange={(event) => setPassword(event.target.value)}
            />
          </label>
          <label className="check">
            <input
              type="checkbox"
              checked={withToken}
              onChange={(event) => {
                setWithToken(event.target.checked);
                setPassword("");
              }}
            />
            {t("login.withToken")}
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
