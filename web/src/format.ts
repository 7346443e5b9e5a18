// Numbers, money, times and durations as the current language writes them.
import i18n from "./i18n";

const locale = () => (i18n.language?.startsWith("zh") ? "zh-CN" : "en");

export function formatNumber(value: number): string {
  return new Intl.NumberFormat(locale()).format(value);
}

export function formatTokens(value: number): string {
  return new Intl.NumberFormat(locale(), { notation: "compact", maximumFractionDigits: 1 }).format(
    value,
  );
}

export function formatUsd(value: number): string {
  return new Intl.NumberFormat(locale(), {
    style: "currency",
    currency: "USD",
    maximumFractionDigits: value !== 0 && Math.abs(value) < 1 ? 4 : 2,
  }).format(value);
}

/** A Unix time (seconds) as a date and time. */
export function formatTime(seconds: number): string {
  return new Intl.DateTimeFormat(locale(), { dateStyle: "medium", timeStyle: "medium" }).format(
    new Date(seconds * 1000),
  );
}

/** A Unix time (seconds) relative to now ("3 minutes ago"). */
export function formatAgo(seconds: number, now: number = Date.now() / 1000): string {
  const diff = seconds - now;
  const rtf = new Intl.RelativeTimeFormat(locale(), { numeric: "auto" });
  const steps: [number, Intl.RelativeTimeFormatUnit][] = [
    [60, "second"],
    [3600, "minute"],
    [86400, "hour"],
    [Infinity, "day"],
  ];
  let unit = 1;
  for (const [limit, name] of steps) {
    if (Math.abs(diff) < limit) return rtf.format(Math.round(diff / unit), name);
    unit = limit;
  }
  return formatTime(seconds);
}

/** A duration in seconds, short: 850 ms, 3.2 s, 4 min 10 s. */
export function formatDuration(seconds: number): string {
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}
