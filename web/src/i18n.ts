// English and Simplified Chinese, chosen from the browser (or the user's last choice, kept in
// localStorage) and switchable in the header. One namespace per part of the app.
import i18n from "i18next";
import LanguageDetector from "i18next-browser-languagedetector";
import { initReactI18next } from "react-i18next";
import enCommon from "./locales/en/common.json";
import enStudent from "./locales/en/student.json";
import enTeacher from "./locales/en/teacher.json";
import zhCommon from "./locales/zh/common.json";
import zhStudent from "./locales/zh/student.json";
import zhTeacher from "./locales/zh/teacher.json";

export const resources = {
  en: { common: enCommon, student: enStudent, teacher: enTeacher },
  zh: { common: zhCommon, student: zhStudent, teacher: zhTeacher },
} as const;

export const languages = [
  { code: "en", label: "English" },
  { code: "zh", label: "简体中文" },
] as const;

void i18n
  .use(LanguageDetector)
  .use(initReactI18next)
  .init({
    resources,
    fallbackLng: "en",
    supportedLngs: ["en", "zh"],
    nonExplicitSupportedLngs: true,
    defaultNS: "common",
    ns: ["common", "student", "teacher"],
    interpolation: { escapeValue: false },
    showSupportNotice: false,
    detection: { order: ["localStorage", "navigator"], caches: ["localStorage"] },
  });

i18n.on("languageChanged", (lng) => {
  document.documentElement.lang = lng.startsWith("zh") ? "zh-CN" : "en";
});

export default i18n;
