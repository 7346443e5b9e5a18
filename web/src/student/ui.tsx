// Small pieces of the student view: a modal dialog, a budget meter, a time, a live status.
import { type ReactNode, useEffect, useId, useRef } from "react";
import { useTranslation } from "react-i18next";
import { formatAgo, formatTime } from "../format";

interface DialogProps {
  open: boolean;
  title: string;
  onClose(): void;
  children: ReactNode;
}

/** A modal `<dialog>`: focus moves in and stays, Escape or a click beside it closes it, focus
 * goes back to what opened it. */
export function Dialog({ open, title, onClose, children }: DialogProps) {
  const { t } = useTranslation();
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
      className="s-dialog"
      aria-labelledby={titleId}
      onClose={onClose}
      onClick={(event) => {
        if (event.target === ref.current) onClose();
      }}
    >
      {open && (
        <>
          <div className="s-dialog-head">
            <h2 id={titleId} className="mono">
              {title}
            </h2>
            <button type="button" className="secondary small" onClick={onClose}>
              {t("close")}
            </button>
          </div>
          <div className="s-dialog-body">{children}</div>
        </>
      )}
    </dialog>
  );
}

/** A Unix time, relative ("3 minutes ago"), with the full time on hover. */
export function Ago({ ts }: { ts: number }) {
  return (
    <time dateTime={new Date(ts * 1000).toISOString()} title={formatTime(ts)}>
      {formatAgo(ts)}
    </time>
  );
}

/** A bar showing how much of something is used, as a `meter` for assistive technology. */
export function Meter({ used, max, label }: { used: number; max: number; label: string }) {
  const share = max > 0 ? Math.min(1, used / max) : 1;
  return (
    <div
      className={`meter ${share >= 0.9 ? "high" : ""}`}
      role="meter"
      aria-label={label}
      aria-valuemin={0}
      aria-valuemax={max}
      aria-valuenow={Math.min(used, max)}
    >
      <span style={{ width: `${Math.round(share * 100)}%` }} />
    </div>
  );
}

/** A polite live region: screen readers hear what it says when it changes. */
export function LiveStatus({ children }: { children: ReactNode }) {
  return (
    <div role="status" aria-live="polite" className="visually-hidden">
      {children}
    </div>
  );
}
