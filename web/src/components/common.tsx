// Small shared pieces: an error message, a loading line, a copy button, a page title.
import { type ReactNode, useEffect, useState } from "react";
import { useTranslation } from "react-i18next";
import { ApiError } from "../api/client";

/** The message of an error, as the service wrote it (it says what was wrong and how to fix it). */
export function errorMessage(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

export function ErrorBox({ error }: { error: unknown }) {
  const { t } = useTranslation();
  if (!error) return null;
  return (
    <div role="alert" className="error-box">
      <strong>{t("error")}: </strong>
      {errorMessage(error)}
    </div>
  );
}

export function Loading() {
  const { t } = useTranslation();
  return (
    <p className="muted" role="status">
      {t("loading")}
    </p>
  );
}

export function CopyButton({ text, label }: { text: string; label?: string }) {
  const { t } = useTranslation();
  const [copied, setCopied] = useState(false);
  useEffect(() => {
    if (!copied) return;
    const timer = setTimeout(() => setCopied(false), 1500);
    return () => clearTimeout(timer);
  }, [copied]);
  return (
    <button
      type="button"
      className="secondary small"
      onClick={() => {
        void navigator.clipboard?.writeText(text).then(() => setCopied(true));
      }}
    >
      {copied ? t("copied") : (label ?? t("copy"))}
    </button>
  );
}

/** A page's heading; also sets the document's title. */
export function PageTitle({ children, title }: { children?: ReactNode; title: string }) {
  useEffect(() => {
    document.title = `${title} · agentica`;
  }, [title]);
  return (
    <div className="page-title">
      <h1>{title}</h1>
      {children}
    </div>
  );
}

/** Save text as a file in the browser (CSV, JSONL exports made on the page). */
export function download(name: string, text: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.click();
  URL.revokeObjectURL(url);
}
