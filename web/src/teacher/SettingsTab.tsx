// Settings: the course's title, model, output limit, provider key (write-only: one can see
// whether it is set, replace or remove it) and the runtime of its new sessions. Only the
// changed fields are sent; the server's refusals are shown as it words them.
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { useTranslation } from "react-i18next";
import { api, unwrap } from "../api/client";
import { useAuth } from "../auth";
import { ErrorBox } from "../components/common";
import { type Course, keys, useCourseContext, useServer } from "./queries";
import { type CourseChange, courseChange, RUNTIMES, type SettingsForm, settingsForm } from "./settings";
import { Field, LiveStatus } from "./ui";

export function SettingsTab() {
  const { course } = useCourseContext();
  return <SettingsEditor key={course.id} course={course} />;
}

function SettingsEditor({ course }: { course: Course }) {
  const { t } = useTranslation("teacher");
  const { me } = useAuth();
  const server = useServer();
  const client = useQueryClient();
  const [form, setForm] = useState<SettingsForm>(() => settingsForm(course));
  const [invalid, setInvalid] = useState<keyof SettingsForm | null>(null);
  const [saved, setSaved] = useState("");
  const admin = me?.role === "admin";
  const set = (patch: Partial<SettingsForm>) => {
    setForm({ ...form, ...patch });
    setSaved("");
  };
  const save = useMutation({
    mutationFn: async (change: CourseChange) =>
      unwrap(
        await api.PATCH("/api/courses/{course_id}", {
          params: { path: { course_id: course.id } },
          body: change,
        }),
      ),
    onSuccess: (updated) => {
      client.setQueryData(keys.course(course.id), { ...updated, role: course.role });
      void client.invalidateQueries({ queryKey: keys.courses });
      setForm(settingsForm(updated));
      setSaved(t("settings.saved"));
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setSaved("");
    const result = courseChange(course, form);
    if ("invalid" in result) {
      setInvalid(result.invalid);
      return;
    }
    setInvalid(null);
    if (Object.keys(result.change).length === 0) {
      setSaved(t("settings.nothing"));
      return;
    }
    save.mutate(result.change);
  };
  const serverRuntime = server.data?.runtime;
  const offered = new Set(server.data?.runtimes ?? ["serial", "batch", "lanes"]);
  return (
    <section aria-labelledby="settings-title">
      <h2 id="settings-title" className="visually-hidden">
        {t("tabs.settings")}
      </h2>
      <form className="t-form" onSubmit={submit} noValidate>
        <section className="panel" aria-labelledby="settings-course">
          <h3 id="settings-course" className="t-panel-title">
            {t("settings.course")}
          </h3>
          <div className="t-form-row">
            <Field label={t("settings.title")} className="grow">
              {({ id }) => (
                <input
                  id={id}
                  value={form.title}
                  maxLength={500}
                  required
                  aria-invalid={invalid === "title" || undefined}
                  onChange={(event) => set({ title: event.target.value })}
                />
              )}
            </Field>
            <div className="t-field">
              <span className="t-label">{t("settings.name")}</span>
              <code className="t-readonly">{course.name}</code>
            </div>
          </div>
          {invalid === "title" && (
            <p role="alert" className="error-box">
              {t("settings.titleRequired")}
            </p>
          )}
        </section>

        <section className="panel" aria-labelledby="settings-model">
          <h3 id="settings-model" className="t-panel-title">
            {t("settings.modelTitle")}
          </h3>
          <div className="t-stack">
            <div className="t-form-row top">
              <Field label={t("settings.model")} hint={t("settings.modelHint")} className="grow">
                {({ id, describedBy }) => (
                  <input
                    id={id}
                    aria-describedby={describedBy}
                    value={form.model}
                    maxLength={200}
                    spellCheck={false}
                    autoComplete="off"
                    placeholder={t("settings.serverModel")}
                    onChange={(event) => set({ model: event.target.value })}
                  />
                )}
              </Field>
              <Field label={t("settings.maxOutput")} hint={t("settings.maxOutputHint")}>
                {({ id, describedBy }) => (
                  <input
                    id={id}
                    aria-describedby={describedBy}
                    inputMode="numeric"
                    value={form.maxOutputTokens}
                    size={10}
                    placeholder={t("serverDefault")}
                    aria-invalid={invalid === "maxOutputTokens" || undefined}
                    onChange={(event) => set({ maxOutputTokens: event.target.value })}
                  />
                )}
              </Field>
            </div>
            {invalid === "maxOutputTokens" && (
              <p role="alert" className="error-box">
                {t("settings.maxOutputInvalid")}
              </p>
            )}
            <Field
              label={t("settings.baseUrl")}
              hint={admin ? t("settings.baseUrlAdminHint") : t("settings.baseUrlHint")}
            >
              {({ id, describedBy }) => (
                <input
                  id={id}
                  aria-describedby={describedBy}
                  value={form.baseUrl}
                  readOnly={!admin}
                  className={admin ? "mono" : "mono t-readonly-input"}
                  spellCheck={false}
                  placeholder={t("settings.baseUrlNone")}
                  onChange={(event) => set({ baseUrl: event.target.value })}
                />
              )}
            </Field>
            <fieldset className="t-fieldset">
              <legend>{t("settings.key")}</legend>
              <p className="t-key-state">
                {course.model_api_key_set ? (
                  <span className="badge ok">{t("settings.keySet")}</span>
                ) : (
                  <span className="badge">{t("settings.keyNotSet")}</span>
                )}{" "}
                <span className="muted">{t("settings.keyWriteOnly")}</span>
              </p>
              <div className="t-radios">
                <label>
                  <input
                    type="radio"
                    name="key"
                    checked={form.key === "keep"}
                    onChange={() => set({ key: "keep", newKey: "" })}
                  />
                  {course.model_api_key_set ? t("settings.keyKeep") : t("settings.keyNone")}
                </label>
                <label>
                  <input
                    type="radio"
                    name="key"
                    checked={form.key === "replace"}
                    onChange={() => set({ key: "replace" })}
                  />
                  {course.model_api_key_set ? t("settings.keyReplace") : t("settings.keyAdd")}
                </label>
                {course.model_api_key_set && (
                  <label>
                    <input
                      type="radio"
                      name="key"
                      checked={form.key === "remove"}
                      onChange={() => set({ key: "remove", newKey: "" })}
                    />
                    {t("settings.keyRemove")}
                  </label>
                )}
              </div>
              {form.key === "replace" && (
                <Field label={t("settings.newKey")} hint={t("settings.newKeyHint")}>
                  {({ id, describedBy }) => (
                    <input
                      id={id}
                      type="password"
                      aria-describedby={describedBy}
                      value={form.newKey}
                      autoComplete="off"
                      spellCheck={false}
                      maxLength={2000}
                      aria-invalid={invalid === "newKey" || undefined}
                      onChange={(event) => set({ newKey: event.target.value })}
                    />
                  )}
                </Field>
              )}
              {invalid === "newKey" && (
                <p role="alert" className="error-box">
                  {t("settings.newKeyRequired")}
                </p>
              )}
            </fieldset>
          </div>
        </section>

        <section className="panel" aria-labelledby="settings-runtime">
          <h3 id="settings-runtime" className="t-panel-title">
            {t("settings.runtimeTitle")}
          </h3>
          <fieldset className="t-fieldset t-runtime">
            <legend>{t("settings.runtime")}</legend>
            {RUNTIMES.filter((r) => r === "" || offered.has(r)).map((runtime) => {
              const name = runtime || "default";
              return (
                <div key={name} className="t-choice">
                  <input
                    id={`runtime-${name}`}
                    type="radio"
                    name="runtime"
                    value={runtime}
                    checked={form.runtime === runtime}
                    aria-describedby={`runtime-${name}-text`}
                    onChange={() => set({ runtime })}
                  />
                  <span>
                    <label htmlFor={`runtime-${name}`}>
                      {runtime
                        ? t(`runtimes.${runtime}.name`)
                        : serverRuntime
                          ? t("runtimes.default.nameWith", {
                              runtime: t(`runtimes.${serverRuntime}.name`, {
                                defaultValue: serverRuntime,
                              }),
                            })
                          : t("runtimes.default.name")}
                    </label>
                    <span id={`runtime-${name}-text`} className="muted">
                      {t(`runtimes.${name}.text`)}
                    </span>
                  </span>
                </div>
              );
            })}
          </fieldset>
          <p className="muted t-form-note">{t("settings.runtimeNote")}</p>
        </section>

        <ErrorBox error={save.error} />
        <div className="row t-save-row">
          <button type="submit" disabled={save.isPending}>
            {save.isPending ? t("settings.saving") : t("settings.save")}
          </button>
          <button
            type="button"
            className="secondary"
            onClick={() => {
              setForm(settingsForm(course));
              setInvalid(null);
              setSaved("");
              save.reset();
            }}
          >
            {t("settings.undo")}
          </button>
          <LiveStatus className="t-status-inline">{saved}</LiveStatus>
        </div>
      </form>
    </section>
  );
}
