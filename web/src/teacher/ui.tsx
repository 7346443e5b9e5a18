// Small pieces of the teacher view: a modal dialog, a confirmation, a live status line, a
// secret shown once, a labelled form field.
import { type ReactNode, useEffect, useId, useRef } from "react";
import { useTranslation } from "react-i18next";
import { CopyButton, ErrorBox } from "../components/common";

interface DialogProps {
  open: boolean;
  title: string;
  onClose(): void;
  children: ReactNode;
  /** The buttons at the bottom (a Close button when none are given). */
  actions?: ReactNode;
  wide?: boolean;
}

/** A modal `<dialog>`: focus moves into it and stays there, Escape or a click beside it
 *  closes it, and focus returns to what opened it. */
export function Dialog({ open, title, onClose, children, actions, wide }: DialogProps) {
  const { t } = useTranslation("teacher");
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) {
      if (typeof dialog.showModal === "function") dialog.showModal();
      else dialog.setAttribute("open", "");
    } else if (!open && dialog.open) {
      if (typeof dialog.close === "function") dialog.close();
      else dialog.removeAttribute("open");
    }
  }, [open]);
  return (
    <dialog
      ref={ref}
      className={wide ? "t-dialog wide" : "t-dialog"}
      aria-labelledby={titleId}
      onClose={onClose}
      onClick={(event) => {
        if (event.target === ref.current) onClose();
      }}
    >
      {open && (
        <>
          <h2 id={titleId}>{title}</h2>
          <div className="t-dialog-body">{children}</div>
          <div className="t-dialog-actions">
            {actions ?? (
              <button type="button" className="secondary" onClick={onClose}>
                {t("close")}
              </button>
            )}
          </div>
        </>
      )}
    </dialog>
  );
}

interface ConfirmProps {
  open: boolean;
  title: string;
  children: ReactNode;
  confirm: string;
  pending?: boolean;
  error?: unknown;
  danger?: boolean;
  onConfirm(): void;
  onCancel(): void;
}

/** A question with a confirm and a cancel button (the cancel button has the focus first). */
export function ConfirmDialog(props: ConfirmProps) {
  const { t } = useTranslation("teacher");
  return (
    <Dialog
      open={props.open}
      title={props.title}
      onClose={props.onCancel}
      actions={
        <>
          <button type="button" className="secondary" onClick={props.onCancel} autoFocus>
            {t("cancel")}
          </button>
          <button
            type="button"
            className={props.danger ? "danger-solid" : undefined}
            disabled={props.pending}
            onClick={props.onConfirm}
          >
            {props.confirm}
          </button>
        </>
      }
    >
      {props.children}
      <ErrorBox error={props.error} />
    </Dialog>
  );
}

/** A polite live region, present from the start so screen readers announce what appears. */
export function LiveStatus({ children, className }: { children?: ReactNode; className?: string }) {
  return (
    <div role="status" aria-live="polite" className={className ?? "t-status"}>
      {children}
    </div>
  );
}

/** A token and its `agentica connect` line, shown this once, each with a copy button. */
export function SecretLines({ token, connect }: { token: string | null; connect: string | null }) {
  const { t } = useTranslation("teacher");
  return (
    <div className="t-secret">
      {token && (
        <div className="t-secret-line">
          <code className="mono">{token}</code>
          <CopyButton text={token} label={t("copyToken")} />
        </div>
      )}
      {connect && (
        <div className="t-secret-line">
          <code className="mono">{connect}</code>
          <CopyButton text={connect} label={t("copyConnect")} />
        </div>
      )}
    </div>
  );
}

/** A label above its control, with an optional hint below it (linked as its description). */
export function Field({
  label,
  hint,
  children,
  className,
}: {
  label: string;
  hint?: ReactNode;
  children: (ids: { id: string; describedBy: string | undefined }) => ReactNode;
  className?: string;
}) {
  const id = useId();
  const hintId = `${id}-hint`;
  return (
    <div className={className ? `t-field ${className}` : "t-field"}>
      <label htmlFor={id}>{label}</label>
      {children({ id, describedBy: hint ? hintId : undefined })}
      {hint && (
        <small id={hintId} className="muted">
          {hint}
        </small>
      )}
    </div>
  );
}
