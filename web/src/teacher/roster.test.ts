import { connectLinesCsv, csvCell, fileName, rosterEmails, splitCsvLine, toCsv } from "./roster";

describe("rosterEmails", () => {
  it("reads e-mails separated by newlines, semicolons and spaces, once each", () => {
    expect(rosterEmails("ann@x.edu\nbob@x.edu; cy@x.edu  ANN@x.edu\n\n")).toEqual([
      "ann@x.edu",
      "bob@x.edu",
      "cy@x.edu",
    ]);
  });

  it("reads a CSV with a header and names (quoted cells too)", () => {
    const csv = 'email,name\r\nann@x.edu,"Lee, Ann"\r\nbob@x.edu,Bob\r\n';
    expect(rosterEmails(csv)).toEqual(["ann@x.edu", "bob@x.edu"]);
  });

  it("finds nothing in blank text", () => {
    expect(rosterEmails("  \n ")).toEqual([]);
  });
});

describe("CSV", () => {
  it("splits a line with quotes", () => {
    expect(splitCsvLine('a,"b, c","d ""e"""')).toEqual(["a", "b, c", 'd "e"']);
  });

  it("quotes cells that need it and defuses formulas", () => {
    expect(csvCell("plain")).toBe("plain");
    expect(csvCell("a,b")).toBe('"a,b"');
    expect(csvCell('say "hi"')).toBe('"say ""hi"""');
    expect(csvCell("=HYPERLINK(1)")).toBe("'=HYPERLINK(1)");
    expect(csvCell("+1, 2")).toBe(`"'+1, 2"`);
  });

  it("writes rows with CRLF", () => {
    expect(toCsv(["a", "b"], [["1", "2"]])).toBe("a,b\r\n1,2\r\n");
  });

  it("builds the connect lines file: email,name,token,connect", () => {
    const text = connectLinesCsv([
      {
        email: "ann@x.edu",
        name: "李安",
        token: "agt_abc",
        connect: "agentica connect --server http://h:8000 --token agt_abc --workspace .",
      },
    ]);
    expect(text.startsWith("\ufeff")).toBe(true);
    expect(text.slice(1).split("\r\n")).toEqual([
      "email,name,token,connect",
      "ann@x.edu,李安,agt_abc,agentica connect --server http://h:8000 --token agt_abc --workspace .",
      "",
    ]);
  });

  it("makes safe file names", () => {
    expect(fileName("web 2026/spring", "connect-lines", "csv")).toBe(
      "web-2026-spring-connect-lines.csv",
    );
    expect(fileName("///", "x", "csv")).toBe("course-x.csv");
  });
});
