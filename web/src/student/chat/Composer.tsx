// The message box at the bottom of the chat: Enter sends, Shift+Enter makes a new line (and
// Enter while an input method is composing, e.g. pinyin, is the IME's). It stays usable while
// the agent works: what is sent then is a new instruction for it, and a Stop button appears.
import { type FormEvent, type KeyboardEvent, useId, useLayoutEffect, useRef, useState } from "react";
import { useTranslation } from "react-i18next";

interface Props {
  /** Send the text; resolves when the service took it (the box is emptied), rejects if not. */
  onSend(text: string): Promise<unknown>;
  running: boolean;
  onStop?: () => void;
  stopping?: boolean;
  /** A teacher guiding a student's agent. */
  asTeacher?: boolean;
  disabled?: boolean;
}

const MAX_HEIGHT = 240;

export function Composer({ onSend, running, onStop, stopping, asTeacher, disabled }: Props) {
  const { t } = useTranslation("student");
  const [text, setText] = useState("");
  const [sending, setSending] = useState(false);
  const box = useRef<HTMLTextAreaElement>(null);
  const id = useId();

  useLayoutEffect(() => {
    const area = box.current;
    if (!area) return;
    area.style.height = "auto";
    area.style.height = `${Math.min(MAX_HEIGHT, area.scrollHeight)}px`;
  }, [text]);

  async function send() {
    const value = text.trim();
    if (!value || sending || disabled) return;
    setSending(true);
    try {
      await onSend(value);
      setText("");
    } catch {
      // the page shows why; the text stays to send again
    } finally {
      setSending(false);
      box.current?.focus();
    }
  }

  function onKeyDown(event: KeyboardEvent<HTMLTextAreaElement>) {
    if (event.key !== "Enter" || event.shiftKey || event.nativeEvent.isComposing) return;
    if (event.keyCode === 229) return; // an IME's Enter in some browsers
    event.preventDefault();
    void send();
  }

  function onSubmit(event: FormEvent) {
    event.preventDefault();
    void send();
  }

  const label = asTeacher ? t("composer.labelTeacher") : t("composer.label");
  const placeholder = asTeacher
    ? t("composer.placeholderTeacher")
    : running
      ? t("composer.placeholderRunning")
      : t("composer.placeholder");
  return (
    <form className={`composer ${running ? "running" : ""}`} onSubmit={onSubmit}>
      <label htmlFor={`${id}-text`} className="visually-hidden">
        {label}
      </label>
      <textarea
        id={`${id}-text`}
        ref={box}
        rows={1}
        value={text}
        placeholder={placeholder}
        aria-describedby={`${id}-hint`}
        disabled={disabled}
        onChange={(event) => setText(event.target.value)}
        onKeyDown={onKeyDown}
      />
      <div className="composer-bar">
        <span id={`${id}-hint`} className="muted small-text">
          {running ? t("composer.hintRunning") : t("composer.hint")}
        </span>
        <div className="row">
          {running && onStop && (
            <button type="button" className="danger" onClick={onStop} disabled={stopping}>
              {stopping ? t("composer.stopping") : t("composer.stop")}
            </button>
          )}
          <button type="submit" disabled={!text.trim() || sending || disabled}>
            {asTeacher ? t("composer.sendTeacher") : t("composer.send")}
          </button>
        </div>
      </div>
    </form>
  );
}
