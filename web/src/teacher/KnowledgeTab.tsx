// Knowledge: what the course shares with its students' agents. Its material (files the agents
// can search: uploaded one at a time, each replacing a file of its name, or removed) and its
// shared answers (offered to a student's agent when a student asks something similar), with
// how often each was offered and the tokens that saved.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { useTranslation } from "react-i18next";
import { ErrorBox, Loading } from "../components/common";
import { formatNumber, formatTime } from "../format";
import {
  listAnswers,
  listMaterial,
  MATERIAL_TYPES,
  MAX_ANSWER_CHARS,
  MAX_QUESTION_CHARS,
  putMaterial,
  readBytes,
  removeMaterial,
  type SharedAnswer,
  shareAnswer,
  tokensSaved,
  unshareAnswer,
} from "./knowledge";
import { keys, useCourseContext } from "./queries";
import { ConfirmDialog, Field, LiveStatus } from "./ui";

export function KnowledgeTab() {
  const { t } = useTranslation("teacher");
  const { course } = useCourseContext();
  return (
    <section aria-labelledby="knowledge-title">
      <h2 id="knowledge-title" className="visually-hidden">
        {t("tabs.knowledge")}
      </h2>
      <MaterialPanel courseId={course.id} />
      <AnswersPanel courseId={course.id} />
    </section>
  );
}

function MaterialPanel({ courseId }: { courseId: string }) {
  const { t } = useTranslation("teacher");
  const client = useQueryClient();
  const material = useQuery({
    queryKey: keys.material(courseId),
    queryFn: () => listMaterial(courseId),
  });
  const [file, setFile] = useState<File | null>(null);
  const [picker, setPicker] = useState(0); // (a new file input once an upload is done)
  const [removing, setRemoving] = useState<string | null>(null);
  const [done, setDone] = useState("");
  const upload = useMutation({
    mutationFn: async (file: File) => putMaterial(courseId, file.name, await readBytes(file)),
    onSuccess: async ({ name, chunks }) => {
      await client.invalidateQueries({ queryKey: keys.material(courseId) });
      setDone(
        chunks ? t("knowledge.uploaded", { name, count: chunks }) : t("knowledge.unchanged", { name }),
      );
      setFile(null);
      setPicker((n) => n + 1);
    },
  });
  const remove = useMutation({
    mutationFn: async (name: string) => {
      await removeMaterial(courseId, name);
      return name;
    },
    onSuccess: async (name) => {
      await client.invalidateQueries({ queryKey: keys.material(courseId) });
      setRemoving(null);
      setDone(t("knowledge.removed", { name }));
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (file) upload.mutate(file);
  };
  const files = material.data ?? [];
  return (
    <section className="panel" aria-labelledby="material-title">
      <h3 id="material-title" className="t-panel-title">
        {t("knowledge.materialTitle")}
      </h3>
      <p className="muted t-lead">{t("knowledge.materialLead")}</p>
      <form className="t-form-row" onSubmit={submit} aria-label={t("knowledge.uploadForm")}>
        <Field label={t("knowledge.fileLabel")} hint={t("knowledge.fileHint")}>
          {({ id, describedBy }) => (
            <input
              key={picker}
              id={id}
              type="file"
              aria-describedby={describedBy}
              accept={MATERIAL_TYPES.join(",")}
              onChange={(event) => {
                setFile(event.target.files?.[0] ?? null);
                setDone("");
                upload.reset();
              }}
            />
          )}
        </Field>
        <button type="submit" disabled={!file || upload.isPending}>
          {upload.isPending ? t("knowledge.uploading") : t("knowledge.upload")}
        </button>
      </form>
      <ErrorBox error={upload.error} />
      <LiveStatus>{done}</LiveStatus>
      {material.isPending && <Loading />}
      <ErrorBox error={material.error} />
      {material.isSuccess &&
        (files.length === 0 ? (
          <p className="muted">{t("knowledge.noMaterial")}</p>
        ) : (
          <div className="t-table-wrap">
            <table className="t-table" aria-labelledby="material-title">
              <thead>
                <tr>
                  <th scope="col">{t("knowledge.file")}</th>
                  <th scope="col">
                    <span className="visually-hidden">{t("actions")}</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {files.map(({ name }) => (
                  <tr key={name}>
                    <th scope="row" className="mono t-cell-subject">
                      {name}
                    </th>
                    <td className="t-row-actions">
                      <button
                        type="button"
                        className="danger small"
                        onClick={() => setRemoving(name)}
                        aria-label={t("named", { action: t("knowledge.remove"), who: name })}
                      >
                        {t("knowledge.remove")}
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ))}
      <ConfirmDialog
        open={removing !== null}
        title={t("knowledge.removeTitle", { name: removing ?? "" })}
        confirm={t("knowledge.removeConfirm")}
        danger
        pending={remove.isPending}
        error={remove.error}
        onConfirm={() => removing !== null && remove.mutate(removing)}
        onCancel={() => {
          setRemoving(null);
          remove.reset();
        }}
      >
        <p>{t("knowledge.removeText")}</p>
      </ConfirmDialog>
    </section>
  );
}

function AnswersPanel({ courseId }: { courseId: string }) {
  const { t } = useTranslation("teacher");
  const client = useQueryClient();
  const answers = useQuery({
    queryKey: keys.answers(courseId),
    queryFn: () => listAnswers(courseId),
  });
  const [question, setQuestion] = useState("");
  const [answer, setAnswer] = useState("");
  const [removing, setRemoving] = useState<SharedAnswer | null>(null);
  const [done, setDone] = useState("");
  const share = useMutation({
    mutationFn: () => shareAnswer(courseId, { question: question.trim(), answer: answer.trim() }),
    onSuccess: async () => {
      await client.invalidateQueries({ queryKey: keys.answers(courseId) });
      setQuestion("");
      setAnswer("");
      setDone(t("knowledge.shared"));
    },
  });
  const unshare = useMutation({
    mutationFn: (shared: SharedAnswer) => unshareAnswer(courseId, shared.id),
    onSuccess: async () => {
      await client.invalidateQueries({ queryKey: keys.answers(courseId) });
      setRemoving(null);
      setDone(t("knowledge.unshared"));
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setDone("");
    share.mutate();
  };
  const rows = answers.data ?? [];
  const ready = question.trim() !== "" && answer.trim() !== "";
  return (
    <section className="panel" aria-labelledby="answers-title">
      <h3 id="answers-title" className="t-panel-title">
        {t("knowledge.answersTitle")}
      </h3>
      <p className="muted t-lead">{t("knowledge.answersLead")}</p>
      <form className="t-form" onSubmit={submit} aria-label={t("knowledge.shareForm")}>
        <Field label={t("knowledge.question")} hint={t("knowledge.questionHint")}>
          {({ id, describedBy }) => (
            <input
              id={id}
              aria-describedby={describedBy}
              value={question}
              maxLength={MAX_QUESTION_CHARS}
              onChange={(event) => setQuestion(event.target.value)}
            />
          )}
        </Field>
        <Field label={t("knowledge.answer")}>
          {({ id }) => (
            <textarea
              id={id}
              rows={4}
              value={answer}
              maxLength={MAX_ANSWER_CHARS}
              onChange={(event) => setAnswer(event.target.value)}
            />
          )}
        </Field>
        <div className="row">
          <button type="submit" disabled={!ready || share.isPending}>
            {share.isPending ? t("knowledge.sharing") : t("knowledge.share")}
          </button>
        </div>
      </form>
      <ErrorBox error={share.error} />
      <LiveStatus>{done}</LiveStatus>
      {answers.isPending && <Loading />}
      <ErrorBox error={answers.error} />
      {answers.isSuccess &&
        (rows.length === 0 ? (
          <p className="muted">{t("knowledge.noAnswers")}</p>
        ) : (
          <div className="t-table-wrap">
            <table className="t-table">
              <caption className="visually-hidden">{t("knowledge.answersTable")}</caption>
              <thead>
                <tr>
                  <th scope="col">{t("knowledge.question")}</th>
                  <th scope="col">{t("knowledge.answer")}</th>
                  <th scope="col" className="num">
                    {t("knowledge.offered")}
                  </th>
                  <th scope="col" className="num">
                    {t("knowledge.tokensSaved")}
                  </th>
                  <th scope="col">{t("knowledge.sharedAt")}</th>
                  <th scope="col">
                    <span className="visually-hidden">{t("actions")}</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {rows.map((row) => (
                  <tr key={row.id}>
                    <th scope="row" className="t-cell-text">
                      {row.question}
                    </th>
                    <td className="t-cell-text">{row.answer}</td>
                    <td className="num">{formatNumber(row.offered)}</td>
                    <td className="num">{formatNumber(row.tokens_saved)}</td>
                    <td className="t-nowrap">{formatTime(row.created_at)}</td>
                    <td className="t-row-actions">
                      <button
                        type="button"
                        className="danger small"
                        onClick={() => setRemoving(row)}
                        aria-label={t("named", { action: t("knowledge.remove"), who: row.question })}
                      >
                        {t("knowledge.remove")}
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
              <tfoot>
                <tr>
                  <th scope="row" colSpan={2}>
                    {t("knowledge.total")}
                  </th>
                  <td className="num">{formatNumber(rows.reduce((sum, r) => sum + r.offered, 0))}</td>
                  <td className="num">{formatNumber(tokensSaved(rows))}</td>
                  <td colSpan={2} />
                </tr>
              </tfoot>
            </table>
          </div>
        ))}
      <ConfirmDialog
        open={removing !== null}
        title={t("knowledge.unshareTitle")}
        confirm={t("knowledge.unshareConfirm")}
        danger
        pending={unshare.isPending}
        error={unshare.error}
        onConfirm={() => removing && unshare.mutate(removing)}
        onCancel={() => {
          setRemoving(null);
          unshare.reset();
        }}
      >
        <blockquote className="t-quote">{removing?.question}</blockquote>
        <p>{t("knowledge.unshareText")}</p>
      </ConfirmDialog>
    </section>
  );
}
