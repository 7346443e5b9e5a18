// /teach/:courseId: the course's title and its tabs (Roster, Usage, Activity, Knowledge,
// Audit, Settings), each a route of its own so a tab can be linked to and reloaded.
import { useTranslation } from "react-i18next";
import { useEffect } from "react";
import { Link, NavLink, Outlet, useLocation, useParams } from "react-router";
import { ErrorBox, Loading, PageTitle } from "../components/common";
import { teaches } from "./CoursesPage";
import { type CourseContext, useCourse } from "./queries";

const TABS = ["roster", "usage", "activity", "knowledge", "audit", "settings"] as const;

export function CoursePage() {
  const { t } = useTranslation("teacher");
  const { courseId = "" } = useParams();
  const course = useCourse(courseId);
  const { pathname } = useLocation();
  const tab = TABS.find((name) => pathname.endsWith(`/${name}`));
  const heading = course.data ? course.data.title || course.data.name : "";
  useEffect(() => {
    if (heading && tab) document.title = `${t(`tabs.${tab}`)} · ${heading} · agentica`;
  }, [heading, tab, t]);
  if (course.isPending) return <Loading />;
  if (course.error) {
    return (
      <>
        <p>
          <Link to="/teach">← {t("courses.back")}</Link>
        </p>
        <ErrorBox error={course.error} />
      </>
    );
  }
  const data = course.data;
  const context: CourseContext = { course: data };
  return (
    <>
      <p className="t-crumbs">
        <Link to="/teach">← {t("courses.back")}</Link>
      </p>
      <PageTitle title={data.title || data.name}>
        {data.title && data.title !== data.name && (
          <span className="muted mono">{data.name}</span>
        )}
      </PageTitle>
      {!teaches(data) ? (
        <p className="notice">{t("courses.notTeacher")}</p>
      ) : (
        <>
          <nav className="tabs" aria-label={t("tabs.label")}>
            {TABS.map((tab) => (
              <NavLink key={tab} to={tab}>
                {t(`tabs.${tab}`)}
              </NavLink>
            ))}
          </nav>
          <Outlet context={context} />
        </>
      )}
    </>
  );
}
