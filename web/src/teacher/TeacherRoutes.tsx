// The teacher view (/teach): the courses one teaches, and per course the tabs Roster, Usage,
// Activity, Knowledge, Audit and Settings. Loaded as its own chunk (with the chart library).
import { Navigate, Route, Routes } from "react-router";
import { useTranslation } from "react-i18next";
import { isStaff, useAuth } from "../auth";
import { Loading, PageTitle } from "../components/common";
import { ActivityTab } from "./ActivityTab";
import { AuditTab } from "./AuditTab";
import { CoursePage } from "./CoursePage";
import { CoursesPage } from "./CoursesPage";
import { KnowledgeTab } from "./KnowledgeTab";
import { RosterTab } from "./RosterTab";
import { SettingsTab } from "./SettingsTab";
import { UsageTab } from "./UsageTab";
import "./teacher.css";

export default function TeacherRoutes() {
  const { t } = useTranslation("teacher");
  const { me, loading } = useAuth();
  if (loading) return <Loading />;
  if (!isStaff(me)) {
    return (
      <>
        <PageTitle title={t("courses.title")} />
        <p className="notice">{t("notStaff")}</p>
      </>
    );
  }
  return (
    <Routes>
      <Route index element={<CoursesPage />} />
      <Route path=":courseId" element={<CoursePage />}>
        <Route index element={<Navigate to="roster" replace />} />
        <Route path="roster" element={<RosterTab />} />
        <Route path="usage" element={<UsageTab />} />
        <Route path="activity" element={<ActivityTab />} />
        <Route path="knowledge" element={<KnowledgeTab />} />
        <Route path="audit" element={<AuditTab />} />
        <Route path="settings" element={<SettingsTab />} />
        <Route path="*" element={<Navigate to="roster" replace />} />
      </Route>
    </Routes>
  );
}
