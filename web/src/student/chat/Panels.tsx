// The chat's side panels: the agent's plan (latest todos), the lanes with their operations
// (stoppable), the workspace's files (with a viewer) and what is left of the budget.
import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { api, unwrap } from "../../api/client";
import { ErrorBox, Loading } from "../../components/common";
import { formatNumber, formatTime, formatTokens, formatUsd } from "../../format";
import { keys } from "../queries";
import type { BudgetLeft, Lane, Todo } from "../transcript";
import { Ago, Dialog } from "../ui";

export function PlanPanel({ todos }: { todos: readonly Todo[] }) {
  const { t } = useTranslation("student");
  const done = todos.filter((todo) => todo.status === "completed").length;
  return (
    <section className="side-panel" aria-labelledby="plan-title">
      <div className="side-head">
        <h2 id="plan-title">{t("plan.title")}</h2>
        <span className="muted">{t("plan.progress", { done, total: todos.length })}</span>
      </div>
      <ol className="todos">
        {todos.map((todo, i) => (
          <li key={i} className={`todo ${todo.status}`}>
            <span className="todo-mark" aria-hidden="true">
              {todo.status === "completed" ? "✓" : todo.status === "in_progress" ? "▸" : "○"}
            </span>
            <span className="todo-text">{todo.content}</span>
            <span className="visually-hidden">({t(`plan.status.${todo.status}`)})</span>
          </li>
        ))}
      </ol>
    </section>
  );
}

function laneBadge(status: string): string {
  if (status === "working") return "busy";
  if (status === "waiting") return "warn";
  if (status === "ended") return "";
  return "ok";
}

export function LanesPanel({
  lanes,
  onStop,
  stopping,
}: {
  lanes: readonly Lane[];
  /** Stop a running operation (absent when the reader may not). */
  onStop?: (op: string) => void;
  stopping: string | null;
}) {
  const { t } = useTranslation("student");
  const [showEnded, setShowEnded] = useState(false);
  const ended = lanes.filter((lane) => !lane.active).length;
  const shown = showEnded ? lanes : lanes.filter((lane) => lane.active);
  return (
    <section className="side-panel" aria-labelledby="lanes-title">
      <div className="side-head">
        <h2 id="lanes-title">{t("lanes.title")}</h2>
        {ended > 0 && (
          <button
            type="button"
            className="link-button"
            aria-pressed={showEnded}
            onClick={() => setShowEnded((v) => !v)}
          >
            {t("lanes.showEnded", { count: ended })}
          </button>
        )}
      </div>
      {shown.length === 0 && <p className="muted">{t("lanes.noneActive")}</p>}
      <ul className="lanes">
        {shown.map((lane) => (
          <li key={lane.id} className={`lane ${lane.active ? "" : "ended"}`}>
            <div className="lane-head">
              <span className="mono lane-id">{lane.id}</span>
              <span className={`badge ${laneBadge(lane.status)}`}>
                {t(`lanes.status.${lane.status}`, { defaultValue: lane.status })}
              </span>
            </div>
            <p className="lane-intent">{lane.intent}</p>
            {lane.termination && <p className="muted small-text">{lane.termination}</p>}
            {lane.operations.length > 0 && (
              <ul className="lane-ops" aria-label={t("lanes.operations", { id: lane.id })}>
                {lane.operations.map((op) => (
                  <li key={op.id} className="lane-op">
                    <div className="lane-op-head">
                      <span className="mono">{op.id}</span>
                      <span className={`badge ${op.status === "running" ? "busy" : op.status === "completed" ? "ok" : op.status === "failed" ? "bad" : ""}`}>
                        {t(`op.status.${op.status}`, { defaultValue: op.status })}
                      </span>
                      {op.status === "running" && onStop && (
                        <button
                          type="button"
                          className="danger small"
                          disabled={stopping === op.id}
                          aria-label={t("op.stopName", { op: op.id })}
                          onClick={() => onStop(op.id)}
                        >
                          {t("op.stop")}
                        </button>
                      )}
                    </div>
                    <code className="lane-op-what">{op.what}</code>
                    {op.progress && <p className="muted small-text">{op.progress}</p>}
                  </li>
                ))}
              </ul>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}

function size(bytes: number): string {
  if (bytes < 1024) return `${formatNumber(bytes)} B`;
  if (bytes < 1024 * 1024) return `${formatNumber(Math.round(bytes / 102.4) / 10)} KB`;
  return `${formatNumber(Math.round(bytes / 104857.6) / 10)} MB`;
}

function FileView({ sessionId, path }: { sessionId: string; path: string }) {
  const { t } = useTranslation("student");
  const file = useQuery({
    queryKey: keys.file(sessionId, path),
    queryFn: async () =>
      unwrap(
        await api.GET("/api/sessions/{session_id}/files/{path}", {
          params: { path: { session_id: sessionId, path: path.replace(/^\/+/, "") } },
        }),
      ),
  });
  if (file.isPending) return <Loading />;
  if (file.error) return <ErrorBox error={file.error} />;
  return (
    <>
      <p className="muted">
        {size(file.data.size)} · {t("files.modified", { time: formatTime(file.data.modified) })}
      </p>
      <pre className="file-content">{file.data.content}</pre>
    </>
  );
}

/** `version` changes when the files may have changed (a run ended, a tool call completed). */
export function FilesPanel({ sessionId, version }: { sessionId: string; version: string }) {
  const { t } = useTranslation("student");
  const [open, setOpen] = useState<string | null>(null);
  const files = useQuery({
    queryKey: [...keys.files(sessionId), version],
    queryFn: async () =>
      unwrap(
        await api.GET("/api/sessions/{session_id}/files", {
          params: { path: { session_id: sessionId } },
        }),
      ),
    placeholderData: (previous) => previous,
  });
  const list = [...(files.data ?? [])].sort((a, b) => a.path.localeCompare(b.path));
  return (
    <section className="side-panel" aria-labelledby="files-title">
      <div className="side-head">
        <h2 id="files-title">{t("files.title")}</h2>
        <button
          type="button"
          className="link-button"
          onClick={() => void files.refetch()}
          disabled={files.isFetching}
        >
          {t("files.refresh")}
        </button>
      </div>
      {files.isPending && <Loading />}
      <ErrorBox error={files.error} />
      {files.data && list.length === 0 && <p className="muted">{t("files.empty")}</p>}
      {list.length > 0 && (
        <ul className="files">
          {list.map((file) => (
            <li key={file.path}>
              <button
                type="button"
                className="file-button"
                onClick={() => setOpen(file.path)}
                title={file.path}
              >
                <span className="mono file-path">{file.path.replace(/^\/+/, "")}</span>
                <span className="muted file-size">{size(file.size)}</span>
              </button>
            </li>
          ))}
        </ul>
      )}
      <Dialog open={open !== null} title={open ?? ""} onClose={() => setOpen(null)}>
        {open !== null && <FileView sessionId={sessionId} path={open} />}
      </Dialog>
    </section>
  );
}

export function BudgetPanel({ budget }: { budget: readonly BudgetLeft[] }) {
  const { t } = useTranslation("student");
  return (
    <section className="side-panel" aria-labelledby="budget-title">
      <div className="side-head">
        <h2 id="budget-title">{t("budget.left")}</h2>
        <Link to="/account" className="small-text">
          {t("budget.details")}
        </Link>
      </div>
      <ul className="budget-left">
        {budget.map((b, i) => (
          <li key={i}>
            <span>
              {[
                b.remainingTokens !== null &&
                  t("budget.tokensLeft", { tokens: formatTokens(Math.max(0, b.remainingTokens)) }),
                b.remainingCostUsd !== null && formatUsd(Math.max(0, b.remainingCostUsd)),
              ]
                .filter(Boolean)
                .join(" · ") || t("budget.unlimited")}
            </span>
            <span className="muted small-text">
              {t(b.scope === "course" ? "budget.class" : "budget.you")}
              {" · "}
              {t(`period.${b.period}`, { defaultValue: b.period })}
              {b.resetsAt !== null && (
                <>
                  {" · "}
                  {t("budget.resets")} <Ago ts={b.resetsAt} />
                </>
              )}
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}
