// The roster's text and the CSV of connect lines: what the teacher pastes or uploads, and the
// file they download once the students are provisioned (tokens are shown only that once).

/** The e-mails a roster holds, read as the server reads it (a CSV with an `email` column and
 *  optionally `name`, header optional, or e-mails separated by newlines, commas, semicolons or
 *  spaces): used for the count shown before sending; the server's reading decides. */
export function rosterEmails(text: string): string[] {
  const rows = text
    .split(/\r?\n/)
    .map((line) => splitCsvLine(line))
    .filter((row) => row.some((cell) => cell.trim() !== ""));
  const first = rows[0]?.[0]?.trim().toLowerCase();
  if (first === "email" || first === "e-mail" || first === "mail") rows.shift();
  let emails: string[];
  if (rows.every((row) => row.length === 1)) {
    emails = rows.flatMap((row) => (row[0] ?? "").split(/[;\s]+/));
  } else {
    emails = rows.map((row) => row[0] ?? "");
  }
  const seen = new Set<string>();
  for (const email of emails) {
    const clean = email.trim().toLowerCase();
    if (clean) seen.add(clean);
  }
  return [...seen];
}

/** One CSV line's cells (double quotes around a cell, "" inside one). */
export function splitCsvLine(line: string): string[] {
  const cells: string[] = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const char = line[i];
    if (quoted) {
      if (char === '"' && line[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (char === '"') {
        quoted = false;
      } else {
        cell += char;
      }
    } else if (char === '"') {
      quoted = true;
    } else if (char === ",") {
      cells.push(cell);
      cell = "";
    } else {
      cell += char;
    }
  }
  cells.push(cell);
  return cells;
}

/** A CSV cell: quoted when it holds a comma, a quote or a line break; a cell a spreadsheet
 *  would run as a formula (=, +, -, @ first) gets a leading apostrophe. */
export function csvCell(value: string): string {
  let text = value;
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** A CSV file (CRLF line ends, RFC 4180) from a header and rows. */
export function toCsv(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return [header, ...rows].map((row) => row.map(csvCell).join(",")).join("\r\n") + "\r\n";
}

export interface ConnectLine {
  email: string;
  name: string;
  token: string;
  connect: string;
}

/** The students' tokens and `agentica connect` lines as a CSV (`email,name,token,connect`),
 *  with a byte-order mark so spreadsheet programs read names in any script as UTF-8. */
export function connectLinesCsv(lines: readonly ConnectLine[]): string {
  return (
    "\ufeff" +
    toCsv(
      ["email", "name", "token", "connect"],
      lines.map((line) => [line.email, line.name, line.token, line.connect]),
    )
  );
}

/** A file name from a course's name and what the file holds (safe on every system). */
export function fileName(course: string, what: string, extension: string): string {
  const safe = course.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^-+|-+$/g, "") || "course";
  return `${safe}-${what}.${extension}`;
}
