// The student's connected computers (`agentica connect`), refreshed every few seconds, and how
// to connect one: a new token and the ready command line, shown once.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useTranslation } from "react-i18next";
import { api, type Schemas, unwrap } from "../api/client";
import { CopyButton, ErrorBox, Loading, PageTitle } from "../components/common";
import { keys, type Server, useServer } from "./queries";
import { Ago } from "./ui";

type Issued = Schemas["IssuedTokenOut"];

/** The `agentica connect` line of a new token: the service's, else made from its address. */
export function connectLine(issued: Issued, server: Server | undefined): string {
  if (issued.connect) return issued.connect;
  const base = server?.base_url || window.location.origin;
  return `agentica connect --server ${base} --token ${issued.token} --workspace .`;
}

/** A secret shown this once, with a copy button and a warning. */
export function ShownOnce({ label, text }: { label: string; text: string }) {
  const { t } = useTranslation("student");
  return (
    <div className="shown-once" role="status">
      <p className="warning-text">
        <strong>{t("tokens.onceTitle")}</strong> {t("tokens.onceWarning")}
      </p>
      <label className="copy-line">
        <span>{label}</span>
        <textarea
          readOnly
          className="mono"
          rows={Math.min(4, Math.ceil(text.length / 70))}
          value={text}
          onFocus={(event) => event.currentTarget.select()}
        />
      </label>
      <CopyButton text={text} />
    </div>
  );
}

function Connect() {
  const { t } = useTranslation("student");
  const client = useQueryClient();
  const server = useServer();
  const issue = useMutation({
    mutationFn: async () =>
      unwrap(
        await api.POST("/api/me/tokens", {
          body: { name: t("executors.tokenName", { date: new Date().toISOString().slice(0, 10) }) },
        }),
      ),
    onSuccess: () => void client.invalidateQueries({ queryKey: keys.tokens }),
  });
  return (
    <section className="panel" aria-labelledby="connect-title">
      <h2 id="connect-title">{t("executors.connectTitle")}</h2>
      <ol className="steps">
        <li>{t("executors.step1")}</li>
        <li>{t("executors.step2")}</li>
        <li>{t("executors.step3")}</li>
      </ol>
      {issue.data ? (
        <ShownOnce label={t("executors.command")} text={connectLine(issue.data, server.data)} />
      ) : (
        <button type="button" onClick={() => issue.mutate()} disabled={issue.isPending}>
          {t("executors.issue")}
        </button>
      )}
      <ErrorBox error={issue.error} />
      <p className="muted small-text">{t("executors.sandboxNote")}</p>
    </section>
  );
}

export function ExecutorsPage() {
  const { t } = useTranslation("student");
  const executors = useQuery({
    queryKey: keys.executors,
    queryFn: async () => unwrap(await api.GET("/api/executors")),
    refetchInterval: 3000,
  });
  const list = executors.data ?? [];
  return (
    <>
      <PageTitle title={t("executors.title")} />
      <section aria-labelledby="machines-title">
        <h2 id="machines-title">{t("executors.connected")}</h2>
        {executors.isPending && <Loading />}
        <ErrorBox error={executors.error} />
        {executors.data && list.length === 0 && (
          <p className="muted" role="status">
            {t("executors.none")}
          </p>
        )}
        {list.length > 0 && (
          <ul className="machines">
            {list.map((x) => (
              <li key={x.id} className="machine panel">
                <div className="machine-head">
                  <span className="dot ok" aria-hidden="true" />
                  <strong>{x.name}</strong>
                  <span className="badge ok">{t("executors.online")}</span>
                  {x.sandboxed ? (
                    <span className="badge ok">{t("executors.sandboxed")}</span>
                  ) : (
                    <span className="badge warn">{t("executors.notSandboxed")}</span>
                  )}
                </div>
                <dl className="facts">
                  <dt>{t("executors.workspace")}</dt>
                  <dd className="mono">{x.workspace}</dd>
                  <dt>{t("executors.offers")}</dt>
                  <dd>{x.can.map((c) => t(`executors.can.${c}`, { defaultValue: c })).join(", ")}</dd>
                  <dt>{t("executors.since")}</dt>
                  <dd>
                    <Ago ts={x.connected_at} />
                  </dd>
                  <dt>{t("executors.id")}</dt>
                  <dd className="mono">{x.id}</dd>
                </dl>
              </li>
            ))}
          </ul>
        )}
      </section>
      <Connect />
    </>
  );
}
