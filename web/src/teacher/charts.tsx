// The Usage tab's charts (chart.js through react-chartjs-2). Only the pieces drawn here are
// registered, so the rest of chart.js stays out of the bundle. Every chart is an image with a
// name that says what it shows; the numbers are also in a table next to it.
import {
  BarController,
  BarElement,
  CategoryScale,
  Chart as ChartJS,
  type ChartData,
  type ChartOptions,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
} from "chart.js";
import { Chart } from "react-chartjs-2";
import { formatNumber, formatTokens, formatUsd } from "../format";
import { type DailySeries, OTHERS, type StudentTotals } from "./usage";

ChartJS.register(
  BarController,
  BarElement,
  LineController,
  LineElement,
  PointElement,
  CategoryScale,
  LinearScale,
  Tooltip,
  Legend,
);

/** Series colours that read on light and dark backgrounds (Okabe–Ito, colour-blind safe). */
const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#7F7F7F"];
const OTHERS_COLOR = "#9AA0A6";

export function seriesColor(index: number, others = false): string {
  return others ? OTHERS_COLOR : PALETTE[index % PALETTE.length]!;
}

/** The page's text and line colours (light or dark), for axes and legends. */
function themeColors() {
  const style = getComputedStyle(document.documentElement);
  const read = (name: string, fallback: string) => style.getPropertyValue(name).trim() || fallback;
  return { text: read("--muted", "#595e68"), grid: read("--border", "#d9dbe0") };
}

/** Options shared by the charts: the theme's colours, no animation, tooltips per index. */
function common(text: string) {
  return {
    responsive: true,
    maintainAspectRatio: false,
    animation: false as const,
    color: text,
    interaction: { mode: "index" as const, intersect: false },
  };
}

interface DailyProps {
  daily: DailySeries;
  /** Each series' label (a student's e-mail, or "Other students"). */
  labelOf(userId: string): string;
  mode: "stacked" | "total";
  /** The chart's accessible name. */
  label: string;
  totalLabel: string;
}

/** Tokens per day: bars stacked by student, or one line of the class's total. */
export function TokensPerDayChart({ daily, labelOf, mode, label, totalLabel }: DailyProps) {
  const { text, grid } = themeColors();
  const stacked = mode === "stacked";
  const scales = {
    x: { stacked, ticks: { color: text }, grid: { color: grid } },
    y: {
      stacked,
      beginAtZero: true,
      ticks: { color: text, callback: (value: number | string) => formatTokens(Number(value)) },
      grid: { color: grid },
    },
  };
  const plugins = {
    legend: { display: stacked, labels: { color: text, boxWidth: 12 } },
    tooltip: {
      callbacks: {
        label: (item: { dataset: { label?: string }; parsed: { y: number | null } }) =>
          `${item.dataset.label ?? ""}: ${formatNumber(item.parsed.y ?? 0)}`,
      },
    },
  };
  if (!stacked) {
    const data: ChartData<"line"> = {
      labels: daily.days,
      datasets: [
        {
          label: totalLabel,
          data: daily.totals,
          borderColor: PALETTE[0],
          backgroundColor: PALETTE[0],
          tension: 0.25,
          pointRadius: 3,
        },
      ],
    };
    const options: ChartOptions<"line"> = { ...common(text), scales, plugins };
    return (
      <div className="t-chart">
        <Chart type="line" data={data} options={options} role="img" aria-label={label} />
      </div>
    );
  }
  const data: ChartData<"bar"> = {
    labels: daily.days,
    datasets: daily.series.map((series, index) => ({
      label: labelOf(series.userId),
      data: series.tokens,
      backgroundColor: seriesColor(index, series.userId === OTHERS),
    })),
  };
  const options: ChartOptions<"bar"> = { ...common(text), scales, plugins };
  return (
    <div className="t-chart">
      <Chart type="bar" data={data} options={options} role="img" aria-label={label} />
    </div>
  );
}

interface StudentsProps {
  students: StudentTotals[];
  labelOf(userId: string): string;
  label: string;
  tokensLabel: string;
  costLabel: string;
}

/** Tokens and cost per student: two bars each, tokens on the lower axis, dollars on the upper. */
export function PerStudentChart({ students, labelOf, label, tokensLabel, costLabel }: StudentsProps) {
  const { text, grid } = themeColors();
  const data: ChartData<"bar"> = {
    labels: students.map((s) => labelOf(s.userId)),
    datasets: [
      {
        label: tokensLabel,
        data: students.map((s) => s.tokens),
        backgroundColor: PALETTE[0],
        xAxisID: "x",
      },
      {
        label: costLabel,
        data: students.map((s) => s.costUsd),
        backgroundColor: PALETTE[1],
        xAxisID: "x1",
      },
    ],
  };
  const options: ChartOptions<"bar"> = {
    ...common(text),
    indexAxis: "y",
    plugins: {
      legend: { labels: { color: text, boxWidth: 12 } },
      tooltip: {
        callbacks: {
          label: (item) =>
            item.datasetIndex === 1
              ? `${costLabel}: ${formatUsd(item.parsed.x ?? 0)}`
              : `${tokensLabel}: ${formatNumber(item.parsed.x ?? 0)}`,
        },
      },
    },
    scales: {
      y: { ticks: { color: text, autoSkip: false }, grid: { display: false } },
      x: {
        position: "bottom",
        beginAtZero: true,
        ticks: { color: text, callback: (value) => formatTokens(Number(value)) },
        grid: { color: grid },
        title: { display: true, text: tokensLabel, color: text },
      },
      x1: {
        position: "top",
        beginAtZero: true,
        ticks: { color: text, callback: (value) => formatUsd(Number(value)) },
        grid: { drawOnChartArea: false },
        title: { display: true, text: costLabel, color: text },
      },
    },
  };
  const height = Math.max(180, students.length * 34 + 90);
  return (
    <div className="t-chart" style={{ height }}>
      <Chart type="bar" data={data} options={options} role="img" aria-label={label} />
    </div>
  );
}
