// The frame of every page after login: a skip link, the navigation for the account's role,
// the language switch and logging out.
import { NavLink, Outlet, useNavigate } from "react-router";
import { useTranslation } from "react-i18next";
import { isStaff, useAuth } from "../auth";
import { languages } from "../i18n";

export function LanguageSwitch() {
  const { t, i18n } = useTranslation();
  return (
    <label className="language">
      <span className="visually-hidden">{t("language")}</span>
      <select
        value={i18n.resolvedLanguage ?? "en"}
        onChange={(event) => void i18n.changeLanguage(event.target.value)}
      >
        {languages.map((language) => (
          <option key={language.code} value={language.code}>
            {language.label}
          </option>
        ))}
      </select>
    </label>
  );
}

export function Layout() {
  const { t } = useTranslation();
  const { me, logout } = useAuth();
  const navigate = useNavigate();
  return (
    <>
      <a className="skip-link" href="#main">
        {t("skip")}
      </a>
      <header className="top">
        <span className="brand">agentica</span>
        <nav aria-label={t("nav.label")}>
          <NavLink to="/sessions">{t("nav.sessions")}</NavLink>
          <NavLink to="/executors">{t("nav.executors")}</NavLink>
          <NavLink to="/account">{t("nav.account")}</NavLink>
          {isStaff(me) && <NavLink to="/teach">{t("nav.teach")}</NavLink>}
        </nav>
        <div className="top-right">
          <LanguageSwitch />
          <span className="muted who" title={me?.email}>
            {me?.name || me?.email}
          </span>
          <button
            type="button"
            className="secondary small"
            onClick={() => void logout().then(() => navigate("/login"))}
          >
            {t("logout")}
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Outlet />
      </main>
    </>
  );
}
