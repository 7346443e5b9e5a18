// /teach: the courses the user teaches (admins: every course), and a form to create one.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { useTranslation } from "react-i18next";
import { Link, useNavigate } from "react-router";
import { api, unwrap } from "../api/client";
import { ErrorBox, Loading, PageTitle } from "../components/common";
import { formatTime } from "../format";
import { type Course, keys } from "./queries";
import { Field } from "./ui";

/** Whether the caller teaches the course (admins run every course). */
export function teaches(course: Course): boolean {
  return course.role === "teacher" || course.role === "admin";
}

export function CoursesPage() {
  const { t } = useTranslation("teacher");
  const courses = useQuery({
    queryKey: keys.courses,
    queryFn: async () => unwrap(await api.GET("/api/courses")),
  });
  const mine = (courses.data ?? []).filter(teaches);
  return (
    <>
      <PageTitle title={t("courses.title")} />
      <section className="panel" aria-labelledby="my-courses">
        <h2 id="my-courses" className="t-panel-title">
          {t("courses.mine")}
        </h2>
        {courses.isPending && <Loading />}
        <ErrorBox error={courses.error} />
        {courses.isSuccess && mine.length === 0 && <p className="muted">{t("courses.none")}</p>}
        {mine.length > 0 && (
          <div className="t-table-wrap">
            <table className="t-table">
              <thead>
                <tr>
                  <th scope="col">{t("courses.course")}</th>
                  <th scope="col">{t("courses.name")}</th>
                  <th scope="col">{t("courses.role")}</th>
                  <th scope="col">{t("courses.model")}</th>
                  <th scope="col">{t("courses.created")}</th>
                </tr>
              </thead>
              <tbody>
                {mine.map((course) => (
                  <tr key={course.id}>
                    <td>
                      <Link to={`/teach/${encodeURIComponent(course.id)}`} className="t-strong-link">
                        {course.title || course.name}
                      </Link>
                    </td>
                    <td className="mono">{course.name}</td>
                    <td>{t(`roles.${course.role === "admin" ? "admin" : "teacher"}`)}</td>
                    <td className="mono">{course.model || <span className="muted">{t("serverDefault")}</span>}</td>
                    <td>{formatTime(course.created_at)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      <CreateCourse />
    </>
  );
}

function CreateCourse() {
  const { t } = useTranslation("teacher");
  const client = useQueryClient();
  const navigate = useNavigate();
  const [name, setName] = useState("");
  const [title, setTitle] = useState("");
  const create = useMutation({
    mutationFn: async () =>
      unwrap(await api.POST("/api/courses", { body: { name: name.trim(), title: title.trim() } })),
    onSuccess: (course) => {
      void client.invalidateQueries({ queryKey: keys.courses });
      client.setQueryData(keys.course(course.id), course);
      void navigate(`/teach/${encodeURIComponent(course.id)}/roster`);
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate();
  };
  return (
    <section className="panel" aria-labelledby="new-course">
      <h2 id="new-course" className="t-panel-title">
        {t("courses.create")}
      </h2>
      <form className="t-form-row" onSubmit={submit}>
        <Field label={t("courses.nameLabel")}>
          {({ id }) => (
            <input
              id={id}
              aria-describedby="new-course-name-hint"
              value={name}
              onChange={(event) => setName(event.target.value)}
              required
              maxLength={64}
              autoComplete="off"
              spellCheck={false}
              placeholder="web-2026"
            />
          )}
        </Field>
        <Field label={t("courses.titleLabel")} className="grow">
          {({ id }) => (
            <input
              id={id}
              value={title}
              onChange={(event) => setTitle(event.target.value)}
              maxLength={500}
              placeholder={t("courses.titlePlaceholder")}
            />
          )}
        </Field>
        <button type="submit" disabled={create.isPending || !name.trim()}>
          {t("courses.createButton")}
        </button>
      </form>
      <p id="new-course-name-hint" className="muted t-form-note t-after-row">
        {t("courses.nameHint")}
      </p>
      <ErrorBox error={create.error} />
    </section>
  );
}
