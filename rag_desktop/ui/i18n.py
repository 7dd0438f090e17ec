"""Every user-visible string of the desktop app, in English and Chinese (one table).

``tr(key, **values)`` looks the key up in the current language and fills ``{name}``
placeholders with ``str.format``. Both languages must define exactly the same keys with
the same placeholders (a test checks it, and that every key the code uses exists). No Qt
here, so the report and the tests use it without a display.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

LANGUAGES = ("en", "zh")

# key: (English, 中文)
TABLE: dict[str, tuple[str, str]] = {
    # ------------------------------------------------------------------ window
    "app.title": ("rag_desktop — compare retrieval methods", "rag_desktop — 检索方法对比"),
    "menu.file": ("&File", "文件(&F)"),
    "menu.view": ("&View", "视图(&V)"),
    "menu.export": ("Export decision report…", "导出决策报告…"),
    "menu.settings": ("Settings…", "设置…"),
    "menu.quit": ("Quit", "退出"),
    "quit.title": ("Quit rag_desktop?", "退出 rag_desktop？"),
    "quit.busy": ("Work is still running (adding files, ranking or writing answers). Quitting stops it; "
                  "files already added stay, an answer being written is lost.",
                  "仍有任务在进行（添加文件、排序或生成回答）。退出会停止这些任务；已添加的文件会保留，"
                  "正在生成的回答会丢失。"),
    "quit.stop_and_quit": ("Stop and quit", "停止并退出"),
    "quit.keep_working": ("Keep working", "继续工作"),
    "menu.focus_query": ("Focus the question box", "转到提问框"),
    "menu.cancel": ("Cancel running work", "取消正在进行的任务"),
    "menu.language": ("中文 / English", "English / 中文"),
    "menu.library": ("&Library", "文档库(&L)"),
    "menu.calibrate": ("Calibration wizard…", "校准向导…"),
    "tab.compare": ("Compare", "对比"),
    "tab.trace": ("CF-RAG trace", "CF-RAG 推理轨迹"),
    "tab.chart": ("Rank movement", "排名变化"),
    "query.label": ("Question:", "问题："),
    "query.placeholder": ("Ask about your documents, in English or Chinese (Enter to ask, Ctrl+L to come back here)",
                          "用中文或英文提问（回车提问，Ctrl+L 回到这里）"),
    "query.tip": ("Recent questions are in the list", "下拉列表中有最近的问题"),
    "query.ask": ("Ask", "提问"),
    "query.stop": ("Stop", "停止"),
    "query.stop_tip": ("Stop the running work (Esc)", "停止正在进行的任务（Esc）"),
    "query.preparing": ("This question is already being prepared", "这个问题正在准备中"),
    "query.empty": ("Type a question first.", "请先输入问题。"),
    "query.auto_answer": ("Generate answers", "生成回答"),
    "query.auto_answer_tip": ("After ranking, let the local model answer from each column and run CF-RAG "
                              "(slower; Esc stops it)",
                              "排序之后，由本地模型按每一列生成回答并运行 CF-RAG（较慢；按 Esc 停止）"),
    "query.run_cfrag": ("CF-RAG", "CF-RAG"),
    "query.run_cfrag_tip": ("Also answer with CF-RAG (the third column) after the answers; it takes several "
                            "minutes on a laptop CPU. Off: the answers only",
                            "生成回答之后再用 CF-RAG 回答（第三列）；在笔记本 CPU 上需要几分钟。关闭：只生成回答"),
    "level.doc": ("whole documents", "整篇文档"),
    "level.chunk": ("passages", "段落"),
    "level.tip": ("Rank whole documents or individual passages", "对整篇文档或单个段落排序"),
    "status.retrieving": ("Ranking…", "正在排序…"),
    "status.compared": ("{n} candidates ranked in {ms} ms", "已在 {ms} 毫秒内完成 {n} 个候选的排序"),
    "status.done": ("All answers ready ({s} s)", "全部回答已生成（{s} 秒）"),
    "status.cancelling": ("Stopping…", "正在停止…"),
    "status.settings_saved": ("Settings saved", "设置已保存"),
    "error.details": ("Details…", "详细信息…"),
    "error.details_title": ("What went wrong", "出错详情"),
    "startup.bad_settings": ("The settings file {path} could not be used ({detail}); the defaults are in effect.",
                             "无法使用设置文件 {path}（{detail}）；当前使用默认设置。"),
    "startup.bad_state": ("The window state could not be read ({detail}). Recent questions and the window size are "
                          "not remembered until the file is fixed or deleted; it is left as it is.",
                          "无法读取窗口状态（{detail}）。在修正或删除该文件之前，不会记住最近的问题和窗口大小；"
                          "该文件保持原样。"),
    "startup.failed_title": ("rag_desktop could not start", "rag_desktop 无法启动"),
    "startup.log": ("Details are in the log: {path}", "详细信息见日志：{path}"),
    # ------------------------------------------------------------------ library
    "lib.none": ("No library open", "尚未打开文档库"),
    "lib.library": ("Library: {path}", "文档库：{path}"),
    "lib.add_folder": ("Add folder…", "添加文件夹…"),
    "lib.add_folder_tip": ("Add a folder of PDF, Word or text files (Ctrl+O)",
                           "添加包含 PDF、Word 或文本文件的文件夹（Ctrl+O）"),
    "lib.rescan": ("Re-scan", "重新扫描"),
    "lib.rescan_tip": ("Look for new, changed and removed files in the library's folders",
                       "查找文档库文件夹中新增、修改和删除的文件"),
    "lib.cancel": ("Cancel", "取消"),
    "lib.cancel_tip": ("Stop adding files (Esc); files already added stay", "停止添加文件（Esc）；已添加的文件会保留"),
    "lib.choose_folder": ("Choose a folder to add", "选择要添加的文件夹"),
    "lib.no_folders": ("This library has no folders yet: use Add folder…", "该文档库还没有文件夹，请先“添加文件夹…”"),
    "lib.already_ingesting": ("Files are already being added; wait or cancel first", "正在添加文件，请稍候或先取消"),
    "lib.starting": ("Starting…", "正在开始…"),
    "lib.progress": ("{stage} {cur}/{total}: {msg}", "{stage} {cur}/{total}：{msg}"),
    "lib.eta": ("about {eta} left", "预计还需 {eta}"),
    "lib.progress_share": ("{pct} % of the whole", "总进度 {pct}%"),
    "lib.cancelled": ("Adding files was cancelled.", "已取消添加文件。"),
    "lib.reread": ("This version reads documents better: reading the library's files again",
                   "新版本能更好地读取文档：正在重新读取文档库的文件"),
    "lib.reread_done": ("Library read again with this version:", "已用新版本重新读取文档库："),
    "lib.report": ("{added} added, {updated} updated, {removed} removed, {unchanged} unchanged, {skipped} skipped "
                   "({s} s)",
                   "新增 {added}，更新 {updated}，移除 {removed}，未变 {unchanged}，跳过 {skipped}（{s} 秒）"),
    "lib.folders": ("Folders ({n})", "文件夹（{n}）"),
    "lib.documents": ("Documents ({n})", "文档（{n}）"),
    "lib.skipped": ("Skipped files ({n})", "跳过的文件（{n}）"),
    "lib.partial": ("partly embedded: {n} chunks kept, not searchable yet — re-scan to finish",
                    "部分已嵌入：已保留 {n} 个片段，尚不可检索——重新扫描以完成"),
    "lib.pages": ("{n} pages", "{n} 页"),
    "lib.watching": ("Watching {n} folders for changes", "正在监视 {n} 个文件夹的变化"),
    "lib.watching_one": ("Watching its folder for changes", "正在监视其文件夹的变化"),
    "lib.watch_off": ("Folder watching is off (Settings: ingest.watch)", "文件夹监视已关闭（设置：ingest.watch）"),
    "lib.watch_missing": ("not available: {names}", "不可用：{names}"),
    "lib.watch_updated": ("updated automatically: {summary}", "已自动更新：{summary}"),
    "lib.watch_tip": ("New, changed, renamed and deleted files in the library's folders are added or removed "
                      "in the background while the app is open",
                      "应用打开期间，文档库文件夹中新建、修改、重命名和删除的文件会在后台自动加入或移除"),
    "lib.watch_summary": ("{added} added, {updated} updated, {removed} removed",
                          "新增 {added}，更新 {updated}，移除 {removed}"),
    "lib.ocr_mark": ("OCR", "已识别"),
    "lib.ocr_tip": ("Scanned: its text was recognised by OCR (check important passages against the page)",
                    "扫描件：文字由 OCR 识别（重要段落请对照原页核对）"),
    "lib.h.name": ("Name", "名称"),
    "lib.h.status": ("Status", "状态"),
    "lib.status.indexed": ("indexed", "已索引"),
    "lib.status.changed": ("changed — re-scan", "已修改——请重新扫描"),
    "lib.status.missing": ("file missing", "文件缺失"),
    "lib.libraries": ("Libraries", "文档库列表"),
    "lib.new": ("New library…", "新建文档库…"),
    "lib.new_tip": ("Create an empty library and switch to it", "新建一个空文档库并切换过去"),
    "lib.open": ("Open", "打开"),
    "lib.open_tip": ("Switch to the selected library (a double-click does it too)", "切换到选中的文档库（双击也可以）"),
    "lib.remove": ("Remove", "移除"),
    "lib.remove_tip": ("Remove the selected library from this list; its folder and files stay on disk",
                       "从列表中移除选中的文档库；其文件夹和文件仍保留在磁盘上"),
    "lib.current_tip": ("{path}\n(open now)", "{path}\n（当前已打开）"),
    "lib.other_tip": ("{path}\n(double-click to open)", "{path}\n（双击打开）"),
    "lib.n_docs": ("documents: {n}", "文档：{n}"),
    "lib.lib_missing": ("not found", "未找到"),
    "lib.lib_missing_tip": ("{path}\nThere is no library in this folder any more (moved or deleted?). Remove it "
                            "from the list, or open it to start an empty library there.",
                            "{path}\n该文件夹中已没有文档库（被移动或删除了？）。"
                            "请将其从列表中移除，或打开它以在那里新建一个空文档库。"),
    "lib.folders_tip": ("Folders:", "文件夹："),
    "lib.open_folder": ("Open library…", "打开文档库…"),
    "lib.open_folder_title": ("Choose a library folder (or an empty folder for a new library)",
                              "选择文档库文件夹（或用一个空文件夹新建文档库）"),
    "lib.not_a_library": ("Cannot open {path} as a library: {reason}.", "无法将 {path} 作为文档库打开：{reason}。"),
    "lib.reason.not_folder": ("it is not a folder", "它不是文件夹"),
    "lib.reason.unreadable": ("it cannot be read", "无法读取它"),
    "lib.reason.not_empty": ("it holds files but no catalog.sqlite", "其中有文件，但没有 catalog.sqlite"),
    "lib.not_a_library_hint": ("Choose a folder that holds a catalog.sqlite, or an empty folder. To index the "
                               "documents in a folder, use “Add folder…” in the open library.",
                               "请选择包含 catalog.sqlite 的文件夹，或一个空文件夹。要为某个文件夹里的文档建立索引，"
                               "请在当前文档库中使用“添加文件夹…”。"),
    "lib.new_title": ("New library", "新建文档库"),
    "lib.new_prompt": ("Name of the new library (it is kept in {path}):", "新文档库的名称（保存在 {path} 中）："),
    "lib.remove_title": ("Remove a library from the list", "从列表中移除文档库"),
    "lib.remove_confirm": ("Remove “{name}” from the list of libraries?\n\nNothing is deleted: the folder {path} "
                           "and your documents stay on disk.",
                           "要从文档库列表中移除“{name}”吗？\n\n"
                           "不会删除任何内容：文件夹 {path} 和你的文档都会保留在磁盘上。"),
    "lib.remove_current": ("The open library cannot be removed from the list: open another one first.",
                           "不能移除当前打开的文档库：请先打开另一个文档库。"),
    "lib.removed": ("“{name}” was removed from the list; its files are kept.",
                    "已从列表中移除“{name}”；其文件仍然保留。"),
    "lib.switching": ("Opening the library “{name}”…", "正在打开文档库“{name}”…"),
    "lib.switched": ("The library “{name}” is open.", "已打开文档库“{name}”。"),
    "lib.already_open": ("“{name}” is the library already open.", "“{name}”已经是当前打开的文档库。"),
    "lib.busy_switching": ("A library is being opened; wait a moment.", "正在打开文档库，请稍候。"),
    "lib.switch_refused": ("Files are still being added to the open library, so it cannot be switched now.",
                           "正在向当前文档库添加文件，因此现在不能切换文档库。"),
    "lib.switch_refused_hint": ("Wait until adding ends, or press Cancel (Esc) — files already added stay.",
                                "请等待添加完成，或按“取消”（Esc）——已添加的文件会保留。"),
    "lib.list_unreadable": ("The list of libraries could not be read ({detail}); it starts again from the open one.",
                            "无法读取文档库列表（{detail}）；将从当前文档库重新开始记录。"),
    "stage.scan": ("Checking", "检查"),
    "stage.parse": ("Reading", "读取"),
    "stage.embed": ("Embedding", "向量化"),
    "stage.ocr": ("OCR", "文字识别"),
    "stage.keywords": ("Keyword sets", "关键词集"),
    "stage.gate": ("Calibration gate", "校准门控"),
    "stage.verify_model": ("Verifying the model", "校验模型"),
    "stage.join_model": ("Preparing the model", "准备模型"),
    "stage.model_ready": ("Model ready", "模型就绪"),
    "stage.probes": ("Writing probe questions", "生成探测问题"),
    "stage.rank_probes": ("Ranking probe questions", "对探测问题排序"),
    "stage.cfrag.standard": ("checking the standard answer", "检查标准回答"),
    "stage.cfrag.retrieve": ("retrieving", "检索"),
    "stage.cfrag.counterfactuals": ("writing counterfactual questions", "生成反事实问题"),
    "stage.cfrag.dialectical_retrieval": ("dialectical retrieval", "辩证检索"),
    "stage.cfrag.scoring": ("scoring evidence", "证据打分"),
    "stage.cfrag.filter": ("filtering evidence", "证据过滤"),
    "stage.cfrag.clustering": ("clustering", "聚类"),
    "stage.cfrag.sampling": ("sampling evidence subsets", "抽取证据子集"),
    "stage.cfrag.hypotheses": ("writing hypotheses", "生成假设"),
    "stage.cfrag.arbitration": ("arbitration", "仲裁"),
    "stage.cfrag.decision": ("decision", "决策"),
    "eta.seconds": ("{n} s", "{n} 秒"),
    "eta.minutes": ("{m} min {s} s", "{m} 分 {s} 秒"),
    # ------------------------------------------------------------------ columns
    "col.baseline": ("Baseline", "基线"),
    "col.causal": ("Causal rerank", "因果重排序"),
    "col.cross_encoder": ("Cross-encoder", "交叉编码器"),
    "col.cfrag": ("CF-RAG", "CF-RAG"),
    "col.rank": ("#", "#"),
    "col.rank_tip": ("Rank in this column", "在本列中的名次"),
    "col.change": ("Δ", "Δ"),
    "col.change_tip": ("Rank change against the baseline", "相对基线的名次变化"),
    "col.title": ("Document", "文档"),
    "col.title_tip": ("Document title (hover for the file)", "文档标题（悬停查看文件）"),
    "col.page": ("Page", "页"),
    "col.page_tip": ("Page where the matching text starts", "匹配文本所在页"),
    "col.scores": ("Scores", "得分"),
    "col.scores_tip": ("The scores this column ranks by", "本列排序所依据的得分"),
    "col.snippet": ("Snippet", "摘录"),
    "col.snippet_tip": ("The matching text; A terms and B terms are coloured", "匹配的文本；A 类词与 B 类词以颜色标出"),
    "col.placeholder": ("Ask a question to fill this column.", "提问后此列将显示结果。"),
    "col.cf_standard_read": ("read by the standard answer, which stands", "标准回答读过的资料（保留标准回答）"),
    "col.empty": ("Nothing found. Add documents, or lower θ in Settings.", "没有结果。请添加文档，或在设置中调低 θ。"),
    "col.running": ("Ranking…", "正在排序…"),
    "col.failed": ("This column could not be filled; see the message above.", "此列未能生成，请查看上方的提示。"),
    "col.cf_waiting": ("CF-RAG runs after the answers (it uses the local model several times; Esc stops it).",
                       "CF-RAG 在生成回答之后运行（需要多次调用本地模型；按 Esc 停止）。"),
    "col.cf_running": ("CF-RAG: {stage} ({cur}/{total})…", "CF-RAG：{stage}（{cur}/{total}）…"),
    "col.followup": ("Your question follows the conversation: how it will be asked is on the left. "
                     "Check it, then Ask this (or Use my words).",
                     "你的问题是接着对话的追问：左侧是它将被检索的完整问法。确认后点“按此提问”（或“用我的原话”）。"),
    "col.cf_off": ("Turn on “Generate answers” to run CF-RAG.", "勾选“生成回答”即可运行 CF-RAG。"),
    "col.cf_disabled": ("CF-RAG is switched off (the “CF-RAG” box beside “Generate answers”).",
                        "CF-RAG 已关闭（见“生成回答”旁的“CF-RAG”选项）。"),
    "col.cf_stopped": ("CF-RAG was stopped.", "CF-RAG 已停止。"),
    "col.cf_preparing": ("CF-RAG: {stage}…", "CF-RAG：{stage}…"),
    "col.cf_used": ("Given to the winning hypothesis", "已提供给胜出的假设"),
    "col.cf_read": ("Read for the answer", "回答时已阅读"),
    "col.cf_cited": ("Cited by the answer", "答案引用了此段"),
    "col.cf_filtered": ("Filtered out: {why}", "已过滤：{why}"),
    "col.cf_margin_noise": ("Δ cannot separate this evidence (spread {spread} ≤ noise {noise})",
                            "Δ 无法区分这些证据（离散度 {spread} ≤ 噪声 {noise}）"),
    "col.cf_margin_ok": ("Δ spread {spread}, noise {noise}", "Δ 离散度 {spread}，噪声 {noise}"),
    "col.baseline_sub": ("Dense similarity s_sim · {level} · {k} candidates · {ms} ms",
                         "稠密相似度 s_sim · {level} · {k} 个候选 · {ms} 毫秒"),
    "col.causal_sub": ("{variant} · τ = {tau}, {source} · A share {a} · empty B: {empty}",
                       "{variant} · τ = {tau}，{source} · A 占比 {a} · B 为空：{empty}"),
    "col.causal_off_chosen": ("Baseline order, as chosen in Settings → Retrieval → “Causal column shows”.",
                              "基线顺序：按 设置 → 检索 → “因果列显示” 中的选择。"),
    "col.causal_off_gate": ("Baseline order: the calibration gate found that neither re-ranking helps this "
                            "library ({metric} on {n} questions: Δ causal {dc}, Δ hybrid {dh}; reliability {rel}).",
                            "基线顺序：校准门控发现两种重排序对本文档库都没有帮助"
                            "（{n} 个问题上的 {metric}：因果 Δ {dc}，混合 Δ {dh}；可靠度 {rel}）。"),
    "col.causal_off_gate_self": ("Baseline order: few of this library's {n} documents echo another's particular "
                                 "key terms ({share}), so re-ranking has nothing to guard against here "
                                 "(reliability {rel}).",
                                 "基线顺序：本文档库 {n} 篇文档中很少有重复另一篇文档特有关键词的（{share}），"
                                 "重排序在这里没有需要防范的情形（可靠度 {rel}）。"),
    "col.ce_sub": ("s(q,e) by {scorer}", "s(q,e) 由 {scorer} 计算"),
    "col.page_n": ("p. {n}", "第 {n} 页"),
    "tau.src.settings": ("set in Settings", "在设置中指定"),
    "tau.src.ingest": ("calibrated at ingest: {p}th percentile of term-pair cosines",
                       "入库时校准：词对余弦的第 {p} 百分位"),
    "tau.src.paper": ("the paper's value (this library is not calibrated yet)", "论文取值（本文档库尚未校准）"),
    "scorer.substitute": ("embedding cosine (a substitute for a cross-encoder)", "向量余弦（交叉编码器的替代方案）"),
    # the causal column's heading: which ranking it shows and why (app.service.Verdict)
    "verdict.helps": ("Re-ranking helps on this library ({probes}, {rel} % reliable): {shown} shown and used "
                      "for the answers",
                      "重排序对本文库有帮助（{probes}，可靠度 {rel}%）：显示{shown}，回答也用它"),
    "verdict.hurts": ("Re-ranking would hurt on this library ({probes}, {rel} % reliable): answers read the "
                      "baseline order; {shown} shown for inspection",
                      "重排序会降低本文库的检索效果（{probes}，可靠度 {rel}%）："
                      "回答使用基线顺序；此列显示{shown}供查看"),
    "verdict.no_gain": ("Re-ranking did not help on this library ({probes}, {rel} % reliable): answers read "
                        "the baseline order; {shown} shown for inspection",
                        "重排序没有改善本文库的检索效果（{probes}，可靠度 {rel}%）："
                        "回答使用基线顺序；此列显示{shown}供查看"),
    "verdict.echoes": ("{shown} shown and used for the answers: {k} of {n} documents echo another's key terms "
                       "({rel} % reliable)",
                       "显示{shown}，回答也用它：{n} 篇文档中有 {k} 篇重复另一篇的关键词（可靠度 {rel}%）"),
    "verdict.no_echoes": ("Answers read the baseline order, {shown} shown: {k} of {n} documents echo another's key "
                          "terms ({rel} % reliable)",
                          "回答使用基线顺序，此列显示{shown}：{n} 篇文档中只有 {k} 篇重复另一篇的关键词"
                          "（可靠度 {rel}%）"),
    "verdict.probes.library": ("{n} probes from its own documents", "{n} 个取自文档本身的探针问题"),
    "verdict.probes.person": ("{n} questions you labelled", "{n} 个由你标注的问题"),
    "verdict.few": (" — too few probes to call it reliable", "——探针问题太少，可靠度没有意义"),
    "verdict.not_calibrated": ("{shown} shown and used for the answers: not calibrated yet",
                               "显示{shown}，回答也用它：尚未校准"),
    # the gate's evidence in words (the causal column's heading tooltip and the Why card; app.library_gate)
    "gate.evidence.library": ("How this was decided, with no model: {k} of the library's {n} documents ({share} %) "
                              "draw a third or more of their key-term weight from one other document, as "
                              "keyword-stuffed pages, passages that restate a question and copies do; re-ranking "
                              "feeds the answers from {thr} %. {rel} % of bootstrap resamples of the documents give "
                              "the same decision. Checked on {when} in {s} s, for the documents the library holds "
                              "now.",
                              "判定依据（不调用任何模型）：本文档库 {n} 篇文档中有 {k} 篇（{share}%）的关键词权重"
                              "有三分之一以上来自另一篇文档，关键词堆砌的页面、复述问题的段落和副本都是这样；"
                              "达到 {thr}% 时回答才使用重排序。对文档的自助重抽样中有 {rel}% 得出相同的决定。"
                              "检查于 {when}，用时 {s} 秒，针对文档库现有的文档。"),
    "gate.evidence.person": ("How this was decided: {n} questions whose answering documents you marked; "
                             "{metric}: baseline {mb}, causal {mc} (Δ {dc}), hybrid {mh} (Δ {dh}). {rel} % of "
                             "bootstrap resamples of your questions give the same decision. Calibrated on {when}; "
                             "it holds until the library's documents change.",
                             "判定依据：{n} 个由你标出答案文档的问题；"
                             "{metric}：基线 {mb}，因果 {mc}（Δ {dc}），混合 {mh}（Δ {dh}）。"
                             "对你的问题的自助重抽样中有 {rel}% 得出相同的决定。校准于 {when}；"
                             "在文档库的文档改变之前一直有效。"),
    "gate.evidence.none": ("No calibration holds for the documents this library holds now: its own check found "
                           "no probe it could use. The hybrid is used; the Calibration wizard decides from your "
                           "own questions.",
                           "本文档库现有的文档还没有有效的校准：文档库自身的检查没有找到可用的探针问题。"
                           "目前使用混合重排序；校准向导可以根据你自己的问题作出决定。"),
    "gate.when_unknown": ("an earlier date", "较早的日期"),
    "verdict.override": ("{shown} chosen for this question", "本问题选择显示{shown}"),
    "verdict.setting": ("{shown} shown, answers read the {answer} (Settings → Retrieval)",
                        "显示{shown}，回答使用{answer}（设置 → 检索）"),
    "verdict.name.baseline": ("baseline order", "基线顺序"),
    "verdict.name.causal": ("causal rerank", "因果重排序"),
    "verdict.name.hybrid": ("hybrid rerank", "混合重排序"),
    # short: the question bar also holds the question, the level and "Generate answers" at 1280 px
    "override.auto": ("Rerank: as calibrated", "重排：按校准"),
    "override.baseline": ("Rerank: off (baseline)", "重排：关（基线）"),
    "override.causal": ("Rerank: causal", "重排：因果"),
    "override.hybrid": ("Rerank: hybrid", "重排：混合"),
    "override.tip": ("What the causal column shows for the next question; the calibration decides by default",
                     "下一个问题的因果列显示什么；默认由校准结果决定"),
    "col.cf_sub": ("{kind} · {n} counterfactuals kept · s(q,e): {scorer}",
                   "{kind} · 保留 {n} 个反事实问题 · s(q,e)：{scorer}"),
    "score.s_sim": ("s_sim", "s_sim"),
    "score.s_c": ("s_c", "s_c"),
    "score.s_qe": ("s(q,e)", "相关度 s(q,e)"),
    "score.hybrid": ("hybrid", "混合"),
    "rank.new": ("new", "新"),
    "rank.new_tip": ("Not in the baseline list", "不在基线列表中"),
    "rank.delta_tip": ("Moved {n} places against the baseline (positive: up)", "相对基线移动 {n} 位（正数为上升）"),
    # ------------------------------------------------------------------ chips and why
    "legend.a": ("A: the question's words or close to them", "A：问题中的词或与之相近的词"),
    "legend.a_tip": ("Document terms that match a question term exactly or are absorbed by one (cosine ≥ τ); "
                     "they are removed before s_c is computed",
                     "与问题中的词完全相同、或被问题中的词吸收（余弦 ≥ τ）的文档词；计算 s_c 前会被移除"),
    "legend.b": ("B: residual terms", "B：剩余词"),
    "legend.b_tip": ("The document's remaining terms; their weighted centroid is compared with the question (s_c)",
                     "文档的其余关键词；它们的加权中心与问题比较得到 s_c"),
    "chips.title": ("Keyword sets of “{title}”", "“{title}”的关键词集"),
    "chips.title_none": ("Keyword sets: select a document", "关键词集：请选择一篇文档"),
    "chips.empty": ("No keyword sets for this document.", "该文档没有关键词集。"),
    "chips.tip_exact": ("{term}: the same word as the question term “{q}” (weight {w})",
                        "{term}：与问题中的“{q}”相同（权重 {w}）"),
    "chips.tip_absorbed": ("{term}: absorbed by the question term “{q}”, cosine {cos} (weight {w})",
                           "{term}：被问题中的“{q}”吸收，余弦 {cos}（权重 {w}）"),
    "chips.tip_b": ("{term}: residual term, weight {w}", "{term}：剩余词，权重 {w}"),
    "why.title": ("Why is “{title}” here?", "为什么“{title}”排在这里？"),
    "why.title_none": ("Why: select a document in any column", "原因：请在任意一列中选择一篇文档"),
    "why.none": ("The causal reranker has no explanation for this document (it is not among its candidates).",
                 "因果重排序没有这篇文档的解释（它不在候选之中）。"),
    "why.moved_up": ("It moved up by {n}: baseline rank {old} → causal rank {new}.",
                     "上升了 {n} 位：基线第 {old} 名 → 因果第 {new} 名。"),
    "why.moved_down": ("It moved down by {n}: baseline rank {old} → causal rank {new}.",
                       "下降了 {n} 位：基线第 {old} 名 → 因果第 {new} 名。"),
    "why.stayed": ("It kept its baseline rank {old}.", "保持基线名次第 {old} 名。"),
    "why.hold_baseline_order": ("The causal column shows the baseline order here, so nothing moves.",
                                "此处因果列显示的是基线顺序，因此名次不会变化。"),
    "why.hold_flat": ("s_c of every candidate lies within {lo}–{hi} ({n} candidates): the re-ranker cannot "
                      "separate them, so s_sim decides.",
                      "所有候选的 s_c 都在 {lo}–{hi} 之间（{n} 个候选）：重排序无法区分它们，因此由 s_sim 决定。"),
    "why.hold_between": ("Its {score} = {v} is rank {r} of {n}: {where}.",
                         "它的 {score} = {v}，在 {n} 个候选中排第 {r}：{where}。"),
    "why.hold_above": ("below the {v} of rank {r}", "低于第 {r} 名的 {v}"),
    "why.hold_below": ("above the {v} of rank {r}", "高于第 {r} 名的 {v}"),
    "why.s_sim": ("Similarity of the whole text to the question (s_sim): {v}.", "全文与问题的相似度（s_sim）：{v}。"),
    "why.s_c": ("Similarity of what the text says beyond the question's own words (s_c, from the B terms): {v}.",
                "文本中问题以外内容与问题的相似度（s_c，由 B 类词计算）：{v}。"),
    "why.no_sc": ("No s_c: the text has no terms left once the shared ones are removed.",
                  "没有 s_c：移除共有词之后，文本没有剩余的词。"),
    "why.hybrid": ("Hybrid score: {v}.", "混合得分：{v}。"),
    "why.hybrid_w": ("Hybrid score {v} = {w} × normalised s_sim + (1 − {w}) × normalised s_c.",
                     "混合得分 {v} = {w} × 归一化 s_sim + (1 − {w}) × 归一化 s_c。"),
    "why.a_terms": ("The question's words or close to them (A, {n}): {terms}.",
                    "问题中的词或与之相近的词（A，{n} 个）：{terms}。"),
    "why.a_none": ("No terms that are the question's words or close to them (A is empty).",
                   "没有问题中的词或与之相近的词（A 为空）。"),
    "why.b_terms": ("Residual terms (B, {n}): {terms}.", "剩余词（B，{n} 个）：{terms}。"),
    "why.b_none": ("No residual terms (B is empty).", "没有剩余词（B 为空）。"),
    "why.exact": ("exact", "完全相同"),
    "why.cos": ("cosine {v}", "余弦 {v}"),
    # The card's opening sentence (present.why_sentence); the numbers are in its fold.
    "why.plain.up": ("Moved up from rank {old} to {new}", "从第 {old} 名升到第 {new} 名"),
    "why.plain.down": ("Moved down from rank {old} to {new}", "从第 {old} 名降到第 {new} 名"),
    "why.plain.kept": ("Kept rank {old}", "保持第 {old} 名"),
    "why.plain.repeats": ("of the question's words it only repeats {terms}", "问题里的词，它只是重复了{terms}"),
    "why.plain.repeats_none": ("it repeats none of the question's words", "它没有重复问题里的词"),
    "why.plain.own": ("the words of its own that carry it are {terms}", "撑起它的是它自己的词{terms}"),
    "why.plain.own_none": ("it has no words of its own beyond the question's", "除了问题里的词，它没有自己的词"),
    "why.plain.sentence": ("{head}: {repeats}; {own}.", "{head}：{repeats}；{own}。"),
    "why.plain.sep": (", ", "、"),
    "why.fold": ("Scores and formula", "得分与公式"),
    "why.fold_tip": ("The numbers behind the sentence: s_sim, s_c, the hybrid formula, the A terms' cosines "
                     "and the B terms' weights.",
                     "这句话背后的数字：s_sim、s_c、混合公式、A 词的余弦和 B 词的权重。"),
    # CF-RAG's notes (core.cfrag.notes templates, said by ui.cf_notes)
    "cfnote.evidence_shrunk": ("the context (n_ctx = {n_ctx}) is too small for {m} hypotheses with full evidence "
                               "decoded together: evidence per hypothesis shrunk from {full} to {budget} tokens",
                               "上下文（n_ctx = {n_ctx}）不足以同时解码 {m} 个带完整证据的假设："
                               "每个假设的证据从 {full} 个词元缩减到 {budget} 个"),
    "cfnote.evidence_shrunk_batches": ("the context (n_ctx = {n_ctx}) is too small for {m} hypotheses with full "
                                       "evidence decoded together: evidence per hypothesis shrunk from {full} to "
                                       "{budget} tokens; the hypotheses are decoded in more than one batch",
                                       "上下文（n_ctx = {n_ctx}）不足以同时解码 {m} 个带完整证据的假设："
                                       "每个假设的证据从 {full} 个词元缩减到 {budget} 个；假设分多批解码"),
    "causalnote.no_query_terms": ("The question has no keywords after stopword filtering: A(d) is empty and s_c "
                                  "scores each candidate's whole keyword set.",
                                  "去掉停用词后问题没有关键词：A(d) 为空，s_c 按每个候选的全部关键词打分。"),
    "causalnote.empty_b_semantic_all": (
        "B(d) is empty for {n} of {window} candidates ({pct}): "
        "at τ = {tau} the question absorbs almost every document keyword for this encoder; "
        "no candidate has an s_c, so the order is the baseline's. Calibrate τ for this encoder.",
        "{window} 个候选中有 {n} 个的 B(d) 为空（{pct}）："
        "在 τ = {tau} 时，问题几乎吸收了该编码器下文档的所有关键词；"
        "没有候选有 s_c，因此顺序与基线相同。请为该编码器校准 τ。"),
    "causalnote.empty_b_semantic_fallback": (
        "B(d) is empty for {n} of {window} candidates ({pct}): "
        "at τ = {tau} the question absorbs almost every document keyword for this encoder; "
        "those candidates fall back to s_sim, so the order is mostly the baseline's. Calibrate τ for this encoder.",
        "{window} 个候选中有 {n} 个的 B(d) 为空（{pct}）："
        "在 τ = {tau} 时，问题几乎吸收了该编码器下文档的所有关键词；"
        "这些候选退回 s_sim，因此顺序大体与基线相同。请为该编码器校准 τ。"),
    "causalnote.empty_b_semantic_demote": (
        "B(d) is empty for {n} of {window} candidates ({pct}): "
        "at τ = {tau} the question absorbs almost every document keyword for this encoder; "
        "those candidates are demoted without an s_c, so the causal score barely discriminates. "
        "Calibrate τ for this encoder.",
        "{window} 个候选中有 {n} 个的 B(d) 为空（{pct}）："
        "在 τ = {tau} 时，问题几乎吸收了该编码器下文档的所有关键词；"
        "这些候选因没有 s_c 被降位，因果分数几乎无法区分。请为该编码器校准 τ。"),
    "causalnote.empty_b_exact_all": (
        "B(d) is empty for {n} of {window} candidates ({pct}): "
        "the candidates' keywords are (almost) all the question's keywords; "
        "no candidate has an s_c, so the order is the baseline's.",
        "{window} 个候选中有 {n} 个的 B(d) 为空（{pct}）："
        "候选的关键词（几乎）都是问题的关键词；"
        "没有候选有 s_c，因此顺序与基线相同。"),
    "causalnote.empty_b_exact_fallback": (
        "B(d) is empty for {n} of {window} candidates ({pct}): "
        "the candidates' keywords are (almost) all the question's keywords; "
        "those candidates fall back to s_sim, so the order is mostly the baseline's.",
        "{window} 个候选中有 {n} 个的 B(d) 为空（{pct}）："
        "候选的关键词（几乎）都是问题的关键词；"
        "这些候选退回 s_sim，因此顺序大体与基线相同。"),
    "causalnote.empty_b_exact_demote": (
        "B(d) is empty for {n} of {window} candidates ({pct}): "
        "the candidates' keywords are (almost) all the question's keywords; "
        "those candidates are demoted without an s_c, so the causal score barely discriminates.",
        "{window} 个候选中有 {n} 个的 B(d) 为空（{pct}）："
        "候选的关键词（几乎）都是问题的关键词；"
        "这些候选因没有 s_c 被降位，因果分数几乎无法区分。"),
    "cfnote.sep": ("; ", "；"),
    "cfnote.identical": ("identical to the original question", "与原问题相同"),
    "cfnote.duplicate": ("duplicate of candidate #{n}", "与第 {n} 个候选重复"),
    "cfnote.restates": ("restates the question: adds no content word, so it asks for the same answer (L(q) = L(q'))",
                        "只是复述原问题：没有新增实词，所问答案相同（L(q) = L(q')）"),
    "cfnote.copied_example": ("copied from the prompt's example, not about this question",
                              "照抄了提示中的示例，与本问题无关"),
    "cfnote.near_example": ("closer to the prompt's example (cos {ex}) than to the question ({sim}): a paraphrase "
                            "of the example",
                            "与提示示例更接近（余弦 {ex}），而与问题的相似度仅为 {sim}：是示例的改写"),
    "cfnote.off_topic": ("sim_sem {sim} <= θ_sim {theta}: off topic", "sim_sem {sim} ≤ θ_sim {theta}：偏离主题"),
    "cfnote.answers_agree": ("closed-book answers agree (token F1 {f1} > {limit}): L(q) = L(q')",
                             "闭卷回答相同（词元 F1 {f1} > {limit}）：L(q) = L(q')"),
    "cfnote.below_top": ("valid, but Info {info} ranks below the top N = {n}",
                         "有效，但信息量 {info} 未进入前 N = {n} 名"),
    "cfnote.no_counterfactual": ("the generator wrote no usable counterfactual question; running without Q_cf",
                                 "生成模型没有写出可用的反事实问题；将在没有 Q_cf 的情况下运行"),
    "cfnote.closed_book_same": ("the closed-book answers were all identical, so L(q) ≠ L(q') could not be judged; "
                                "candidates were ranked with Div_ans = 0.5",
                                "闭卷回答全部相同，无法判断 L(q) ≠ L(q')；候选按 Div_ans = 0.5 排序"),
    "cfnote.none_valid": ("no counterfactual passed validation V(q, q'); φ_causal = 0 for every path",
                          "没有反事实问题通过验证 V(q, q')；每条路径的 φ_causal = 0"),
    "cfnote.substitute_scorer": ("s(q, e) comes from a substitute scorer ({scorer}), not a trained cross-encoder",
                                 "s(q, e) 来自替代评分器（{scorer}），而非训练过的交叉编码器"),
    "cfnote.all_filtered": ("every retrieved passage was removed by the quality filter",
                            "检索到的段落全部被质量过滤器移除"),
    "cfnote.no_evidence": ("no evidence passed retrieval and filtering; no answer was generated",
                           "没有证据通过检索和过滤；未生成回答"),
    "cfnote.synthesis_empty": ("the synthesis reply had no answer; using the highest-Ψ hypothesis",
                               "综合回复中没有答案；采用 Ψ 最高的假设"),
    "cfnote.synthesis_ungrounded": ("the synthesis answer {answer} is neither in the evidence nor one of the "
                                    "candidates; using the highest-Ψ hypothesis",
                                    "综合答案 {answer} 既不在证据中，也不是候选之一；采用 Ψ 最高的假设"),
    "cfnote.budget_used": ("the answer comes from a reply that used all of its {limit}-token budget, so it may be "
                           "cut short (CFTuning.max_tokens_hypothesis / max_tokens_synthesis)",
                           "答案来自用尽了 {limit} 个词元额度的回复，可能被截断"),
    "cfnote.tag.role": ("role", "角色"),
    "cfnote.tag.time": ("time", "时间"),
    "cfnote.tag.entity": ("entity", "实体"),
    "cfnote.tag.category": ("category", "类别"),
    "cfnote.tag.scope": ("scope", "范围"),
    "cfnote.tag.unknown": ("not given", "未标明"),
    # CF-RAG's trace in plain words (core.cfrag.plain: the English is the core's template)
    "cfplain.cf_off": ("We did not write contrasting questions: they are switched off.",
                       "我们没有编写对照问题：该功能已关闭。"),
    "cfplain.cf_none": ("We asked the model for questions close to yours that need a different answer; it wrote none "
                        "we could use.",
                        "我们请模型写出与你的问题相近、但答案应当不同的问题；它没有写出可用的问题。"),
    "cfplain.cf_rejected": ("We asked the model for questions close to yours that need a different answer; none of "
                            "the {n} it wrote passed the checks.",
                            "我们请模型写出与你的问题相近、但答案应当不同的问题；它写出的 {n} 个问题都没有通过检查。"),
    "cfplain.cf_kept_differ": ("We asked the model for questions close to yours that need a different answer and "
                               "kept {kept} of the {n} it wrote, such as “{example}”; answering from memory, the "
                               "model answered each differently from yours.",
                               "我们请模型写出与你的问题相近、但答案应当不同的问题，"
                               "从它写的 {n} 个中保留了 {kept} 个，例如“{example}”；不看文档作答时，"
                               "模型对每个问题的回答都与对你的问题的回答不同。"),
    "cfplain.cf_kept_mixed": ("We asked the model for questions close to yours that need a different answer and kept "
                              "{kept} of the {n} it wrote, such as “{example}”; answering from memory, the model "
                              "answered {differ} of them differently from yours; its answers to the other {other} "
                              "could not be compared.",
                              "我们请模型写出与你的问题相近、但答案应当不同的问题，"
                              "从它写的 {n} 个中保留了 {kept} 个，例如“{example}”；不看文档作答时，"
                              "模型对其中 {differ} 个问题的回答与对你的问题的回答不同；"
                              "另外 {other} 个的回答无法比较。"),
    "cfplain.cf_kept_unknown": ("We asked the model for questions close to yours that need a different answer and "
                                "kept {kept} of the {n} it wrote, such as “{example}”; the model's answers from "
                                "memory could not show whether they differ from yours.",
                                "我们请模型写出与你的问题相近、但答案应当不同的问题，"
                                "从它写的 {n} 个中保留了 {kept} 个，例如“{example}”；"
                                "模型不看文档时的回答无法说明它们的答案是否与你的问题不同。"),
    "cfplain.ret_none": ("We searched your documents and found no passage.",
                         "我们检索了你的文档，没有找到段落。"),
    "cfplain.ret_none_kept": ("We searched your documents and found passages ({pool}), but none was clear and "
                              "relevant enough to keep.",
                              "我们检索了你的文档，找到了段落（{pool} 个），但没有一个足够清晰、相关，因此都未保留。"),
    "cfplain.ret_all": ("We searched your documents with your question; every passage found was kept ({pool} in all).",
                        "我们用你的问题检索了你的文档；找到的段落全部保留（共 {pool} 个）。"),
    "cfplain.ret_all_cf": ("We searched your documents with your question and the contrasting ones; every passage "
                           "found was kept ({pool} in all).",
                           "我们用你的问题和对照问题检索了你的文档；找到的段落全部保留（共 {pool} 个）。"),
    "cfplain.ret_some": ("We searched your documents with your question and kept {kept} of the {pool} passages "
                         "found; the others were near-copies of a kept one, too weak, or not relevant enough.",
                         "我们用你的问题检索了你的文档，在找到的 {pool} 个段落中保留了 {kept} 个；"
                         "其余的与保留的段落几乎重复、质量太低或相关性不足。"),
    "cfplain.ret_some_cf": ("We searched your documents with your question and the contrasting ones and kept {kept} "
                            "of the {pool} passages found; the others were near-copies of a kept one, too weak, or "
                            "not relevant enough.",
                            "我们用你的问题和对照问题检索了你的文档，在找到的 {pool} 个段落中保留了 {kept} 个；"
                            "其余的与保留的段落几乎重复、质量太低或相关性不足。"),
    "cfplain.test_none": ("With no contrasting question, no passage could be tested against one.",
                          "没有对照问题，因此无法用对照问题检验任何段落。"),
    "cfplain.test_stands_cited": ("We tested the passage the answer cites, {p} “{title}”, against the contrasting "
                                  "questions: it fits your question better than any of them (by {delta}), so the "
                                  "passage stands.",
                                  "我们用对照问题检验了回答引用的段落 {p}“{title}”："
                                  "它与你的问题比与任何对照问题都更吻合（高出 {delta}），因此该段落站得住。"),
    "cfplain.test_stands_read": ("We tested the first passage the answer read, {p} “{title}”, against the "
                                 "contrasting questions: it fits your question better than any of them (by {delta}), "
                                 "so the passage stands.",
                                 "我们用对照问题检验了回答最先阅读的段落 {p}“{title}”："
                                 "它与你的问题比与任何对照问题都更吻合（高出 {delta}），因此该段落站得住。"),
    "cfplain.test_even_cited": ("We tested the passage the answer cites, {p} “{title}”, against the contrasting "
                                "questions: it fits “{rival}” about as well as yours (a difference of {delta}, "
                                "within the noise of {noise}), so the test cannot tell which of the two it answers.",
                                "我们用对照问题检验了回答引用的段落 {p}“{title}”："
                                "它与“{rival}”的吻合程度和与你的问题差不多（相差 {delta}，在噪声 {noise} 以内），"
                                "因此这项检验无法判断它回答的是哪个问题。"),
    "cfplain.test_even_read": ("We tested the first passage the answer read, {p} “{title}”, against the contrasting "
                               "questions: it fits “{rival}” about as well as yours (a difference of {delta}, within "
                               "the noise of {noise}), so the test cannot tell which of the two it answers.",
                               "我们用对照问题检验了回答最先阅读的段落 {p}“{title}”："
                               "它与“{rival}”的吻合程度和与你的问题差不多（相差 {delta}，在噪声 {noise} 以内），"
                               "因此这项检验无法判断它回答的是哪个问题。"),
    "cfplain.test_rival_cited": ("We tested the passage the answer cites, {p} “{title}”, against the contrasting "
                                 "questions: it fits “{rival}” better than yours (by {delta}), so it may answer that "
                                 "question rather than yours.",
                                 "我们用对照问题检验了回答引用的段落 {p}“{title}”："
                                 "它与“{rival}”比与你的问题更吻合（高出 {delta}），因此它回答的可能是那个问题，"
                                 "而不是你的问题。"),
    "cfplain.test_rival_read": ("We tested the first passage the answer read, {p} “{title}”, against the contrasting "
                                "questions: it fits “{rival}” better than yours (by {delta}), so it may answer that "
                                "question rather than yours.",
                                "我们用对照问题检验了回答最先阅读的段落 {p}“{title}”："
                                "它与“{rival}”比与你的问题更吻合（高出 {delta}），因此它回答的可能是那个问题，"
                                "而不是你的问题。"),
    "cfplain.div_one": ("The model read the kept passages ({n}) together and wrote one answer from them.",
                        "模型一起阅读了保留的段落（{n} 个），并据此写出一个回答。"),
    "cfplain.div_one_part": ("The model read {n} of the {kept} kept passages together and wrote one answer from them.",
                             "模型一起阅读了 {kept} 个保留段落中的 {n} 个，并据此写出一个回答。"),
    "cfplain.div": ("We sorted the kept passages ({n}) into topic groups ({k}) and gave the model different mixes of "
                    "them ({m}), one draft answer per mix.",
                    "我们把保留的段落（{n} 个）按主题分组（{k} 组），给模型不同的段落组合（{m} 种），"
                    "每种组合写出一个候选回答。"),
    "cfplain.arb_tie": ("Drafts {w} and {r} scored the same; {w}, written first, comes first.",
                        "候选回答 {w} 与 {r} 得分相同；{w} 先写出，因此排在前面。"),
    "cfplain.arb_nocf": ("Draft {w} scored highest, ahead of {r} by {margin}, on how well its answer fits its "
                         "passages and your question; with no contrasting question, nothing else counted.",
                         "候选回答 {w} 得分最高，领先 {r} {margin}，依据是它的回答与其段落及你的问题的吻合程度；"
                         "没有对照问题，因此没有其他因素计入。"),
    "cfplain.arb_lam0": ("Draft {w} scored highest, ahead of {r} by {margin}, on how well its answer fits its "
                         "passages and your question; the contrasting questions were given no weight (λ = 0).",
                         "候选回答 {w} 得分最高，领先 {r} {margin}，依据是它的回答与其段落及你的问题的吻合程度；"
                         "对照问题的权重为零（λ = 0）。"),
    "cfplain.arb_flat": ("Draft {w} scored highest, ahead of {r} by {margin}; the drafts' passages held up equally "
                         "well against the contrasting questions (their differences, at most {spread}, are within "
                         "the noise of {noise}).",
                         "候选回答 {w} 得分最高，领先 {r} {margin}；面对对照问题，"
                         "各候选回答的段落表现相当（差异最多 {spread}，在噪声 {noise} 以内）。"),
    "cfplain.arb_both": ("Draft {w} scored highest, ahead of {r} by {margin}: its answer fits its passages and your "
                         "question best, and its passages hold up best against the contrasting questions.",
                         "候选回答 {w} 得分最高，领先 {r} {margin}：它的回答与其段落及你的问题最吻合，"
                         "它的段落面对对照问题也最站得住。"),
    "cfplain.arb_fit": ("Draft {w} scored highest, ahead of {r} by {margin}, on how well its answer fits its "
                        "passages and your question; the passages of {c} held up better against the contrasting "
                        "questions.",
                        "候选回答 {w} 得分最高，领先 {r} {margin}，依据是它的回答与其段落及你的问题的吻合程度；"
                        "{c} 的段落面对对照问题更站得住。"),
    "cfplain.arb_contrast": ("Draft {w} scored highest, ahead of {r} by {margin}, on how well its passages hold up "
                             "against the contrasting questions; the answer of {h} fit its passages and your "
                             "question better.",
                             "候选回答 {w} 得分最高，领先 {r} {margin}，依据是它的段落面对对照问题更站得住；"
                             "{h} 的回答与其段落及你的问题更吻合。"),
    "cfplain.arb_mixed": ("Draft {w} scored highest overall, ahead of {r} by {margin}, without being first on either "
                          "part: the answer of {h} fit its passages and your question best, and the passages of {c} "
                          "held up best against the contrasting questions.",
                          "候选回答 {w} 总分最高，领先 {r} {margin}，但两项都不是单项第一："
                          "{h} 的回答与其段落及你的问题最吻合，{c} 的段落面对对照问题最站得住。"),
    "cfplain.dec_none": ("No passage was left to answer from, so no answer was written.",
                         "没有可用于作答的段落，因此没有写出回答。"),
    "cfplain.dec_single": ("There was one draft, and its answer is the answer.",
                           "只有一个候选回答，最终回答就是它。"),
    "cfplain.dec_select": ("The drafts agree (word overlap {agr}, {thr} needed), so the answer is that of the "
                           "highest-scored draft, {w}.",
                           "各候选回答一致（用词重合度 {agr}，需要 {thr}），因此采用得分最高的候选回答 {w}。"),
    "cfplain.dec_reread_same": ("The drafts disagree (word overlap {agr}, {thr} needed), so the model read all the "
                                "kept passages again in one pass; its answer is the same as {j}'s.",
                                "各候选回答不一致（用词重合度 {agr}，需要 {thr}），"
                                "因此模型把保留的段落全部重新读了一遍；它的回答与 {j} 相同。"),
    "cfplain.dec_reread_new": ("The drafts disagree (word overlap {agr}, {thr} needed), so the model read all the "
                               "kept passages again in one pass; its answer differs from every draft's.",
                               "各候选回答不一致（用词重合度 {agr}，需要 {thr}），"
                               "因此模型把保留的段落全部重新读了一遍；它的回答与每个候选回答都不同。"),
    "cfplain.dec_synth_same": ("The drafts disagree (word overlap {agr}, {thr} needed), so the model was shown the "
                               "top drafts with their passages and wrote one answer, the same as {j}'s.",
                               "各候选回答不一致（用词重合度 {agr}，需要 {thr}），"
                               "因此让模型参考排名靠前的候选回答及其段落写出一个回答，它与 {j} 相同。"),
    "cfplain.dec_synth_new": ("The drafts disagree (word overlap {agr}, {thr} needed), so the model was shown the "
                              "top drafts with their passages and wrote one answer that differs from every draft's.",
                              "各候选回答不一致（用词重合度 {agr}，需要 {thr}），"
                              "因此让模型参考排名靠前的候选回答及其段落写出一个回答，它与每个候选回答都不同。"),
    "cfplain.dec_fallback_empty": ("The drafts disagree (word overlap {agr}, {thr} needed); the model's combined "
                                   "answer came back empty, so the answer is that of the highest-scored draft, {w}.",
                                   "各候选回答不一致（用词重合度 {agr}，需要 {thr}）；模型综合出的回答为空，"
                                   "因此采用得分最高的候选回答 {w}。"),
    "cfplain.dec_fallback_ungrounded": ("The drafts disagree (word overlap {agr}, {thr} needed); the model's "
                                        "combined answer was neither in the passages nor one of the drafts, so the "
                                        "answer is that of the highest-scored draft, {w}.",
                                        "各候选回答不一致（用词重合度 {agr}，需要 {thr}）；"
                                        "模型综合出的回答既不在段落中，也不是任何一个候选回答，"
                                        "因此采用得分最高的候选回答 {w}。"),
    "cfplain.dec_fallback": ("The drafts disagree (word overlap {agr}, {thr} needed); the model's combined answer "
                             "could not be used, so the answer is that of the highest-scored draft, {w}.",
                             "各候选回答不一致（用词重合度 {agr}，需要 {thr}）；模型综合出的回答无法使用，"
                             "因此采用得分最高的候选回答 {w}。"),
    "cfplain.dec_top": ("The answer is that of the highest-scored draft, {w}.",
                        "最终回答采用得分最高的候选回答 {w}。"),
    "cfplain.dec_chosen": ("The answer is that of draft {w}.",
                           "最终回答采用候选回答 {w}。"),
    "cfplain.dec_reread": ("The model read all the kept passages again in one pass and answered from them.",
                           "模型把保留的段落全部重新读了一遍，并据此作答。"),
    "cfplain.dec_synth": ("The model was shown the top drafts with their passages and wrote one answer.",
                          "模型参考排名靠前的候选回答及其段落，写出了一个回答。"),
    "cfplain.std_confident": ("The standard answer is held by a passage it read ({share} of what it adds to your "
                              "question is there, {need} needed), so CF-RAG keeps it and writes no answer of its own.",
                              "标准回答被它读过的一段资料支持（它在问题之外补充的内容有 {share} "
                              "出现在该段中，需要 {need}），因此 CF-RAG 保留它，不再另写回答。"),
    "cfplain.std_not_found": ("The standard answer says your documents do not hold the answer, so CF-RAG searched "
                              "again with contrasting questions.",
                              "标准回答说文档中没有答案，因此 CF-RAG 用对照问题重新检索。"),
    "cfplain.std_weak": ("Only {share} of what the standard answer adds to your question is in a passage it read "
                         "({need} needed), so CF-RAG searched again with contrasting questions.",
                         "标准回答在问题之外补充的内容只有 {share} 出现在它读过的资料中（需要 {need}），"
                         "因此 CF-RAG 用对照问题重新检索。"),
    "cfplain.std_agrees": ("CF-RAG's own answer, “{cand}”, says the same as the standard answer, so the standard "
                           "answer and its citations are kept.",
                           "CF-RAG 自己的回答“{cand}”与标准回答一致，因此保留标准回答及其引用。"),
    "cfplain.std_replaced": ("CF-RAG's own answer is held by its passages ({share} of what it adds, {need} needed) "
                             "and differs from the standard answer, so it replaces it.",
                             "CF-RAG 自己的回答被它的资料支持（补充内容的 {share}，需要 {need}），且与标准回答不同，"
                             "因此用它替换标准回答。"),
    "cfplain.std_unsupported": ("CF-RAG's own answer, “{cand}”, is not held by its passages either ({share}, "
                                "{need} needed), so the standard answer is kept: your documents may not answer "
                                "this question.",
                                "CF-RAG 自己的回答“{cand}”也没有被它的资料支持（{share}，需要 {need}），"
                                "因此保留标准回答：文档可能无法回答这个问题。"),
    "cfplain.dec_cut": ("The reply the answer comes from used all of its length, so the answer may be cut short.",
                        "最终回答所依据的回复用完了全部长度，回答可能被截断。"),
    "why.fallback_used": ("B was empty, so the similarity score was used instead (fallback).",
                          "B 为空，因此改用相似度得分（回退）。"),
    "why.empty_b_demoted": ("B was empty, so the document was placed below the others (no fallback).",
                            "B 为空，因此该文档排在其他文档之后（未回退）。"),
    "why.no_fallback": ("No fallback was needed.", "无需回退。"),
    # ------------------------------------------------------------------ answers
    "answer.baseline": ("Answer from the baseline", "基于基线的回答"),
    "answer.causal": ("Answer from the causal rerank", "基于因果重排序的回答"),
    "answer.cross_encoder": ("Answer from the cross-encoder", "基于交叉编码器的回答"),
    "answer.cfrag": ("CF-RAG answer", "CF-RAG 回答"),
    "answer.idle": ("", ""),
    "answer.waiting": ("waiting for the model…", "等待模型…"),
    "answer.off": ("answers are off", "未开启回答生成"),
    "answer.cf_disabled": ("CF-RAG is off", "CF-RAG 已关闭"),
    "answer.not_run": ("not run", "未运行"),
    "answer.generating": ("writing…", "正在生成…"),
    # two columns reading the same sources in the same order get one answer, written once.
    "answer.shared_wait": ("same sources as {column}: its answer is written once and shown here too",
                           "与“{column}”列的资料相同：只生成一次答案，也显示在这里"),
    "answer.shared_done": ("{column}'s answer (same sources)", "同“{column}”的答案（资料相同）"),
    "answer.preparing": ("{msg} ({cur}/{total})", "{msg}（{cur}/{total}）"),
    "answer.preparing_bytes": ("{msg}: {done} of {total} MB", "{msg}：{done} / {total} MB"),
    "answer.preparing_eta": ("{msg}: {done} of {total} MB, about {eta} s left",
                             "{msg}：{done} / {total} MB，约剩 {eta} 秒"),
    "conv.title": ("Conversation", "对话"),
    "conv.new": ("New conversation", "新对话"),
    "conv.new_tip": ("Start a new thread: the next question is not read as a follow-up",
                     "开始新的对话：下一个问题不再当作追问"),
    "conv.export": ("Export…", "导出…"),
    "conv.export_title": ("Export the conversation", "导出对话"),
    "conv.exported": ("Conversation saved to {path}", "对话已保存到 {path}"),
    "conv.asked_as": ("Follow-up, asked as (edit if needed):", "追问将按以下问题检索（可修改）："),
    "conv.ask": ("Ask this", "按此提问"),
    "conv.own_words": ("Use my words", "用我的原话"),
    "conv.rewriting": ("rewriting the follow-up with the local model…", "正在用本地模型改写追问…"),
    "crosslang.also": ("also searched as: {q}", "同时检索：{q}"),
    "crosslang.also_in": ("also searched as: {q} (translated in {s} s)", "同时检索：{q}（翻译用时 {s} 秒）"),
    "crosslang.no_generator": ("ranked as typed only: no local model is ready to translate the question",
                               "仅按原问题排序：没有可用来翻译问题的本地模型"),
    "crosslang.failed": ("ranked as typed only: translating the question failed",
                         "仅按原问题排序：问题翻译失败"),
    "crosslang.timeout": ("ranked as typed only: translating the question took over {s} s",
                          "仅按原问题排序：问题翻译超过 {s} 秒"),
    "crosslang.found_by": ("found by the translated question", "由翻译后的问题检出"),
    "col.file_missing": ("⚠ file missing", "⚠ 文件已不存在"),
    "viewer.file_missing": ("{name} is no longer on disk (moved or deleted): re-scan the library to update it",
                            "{name} 已不在磁盘上（已移动或删除）：请重新扫描文档库以更新"),
    "conv.rewritten_in": ("rewritten by the local model in {s} s", "本地模型改写，用时 {s} 秒"),
    "conv.fallback": ("{note}; your own words are used", "{note}；将使用你的原话"),
    "conv.unchanged": ("the question already stands on its own", "该问题本身已经完整"),
    "conv.note.timeout": ("the rewrite took too long", "改写超时"),
    "conv.note.failed": ("the rewrite failed", "改写失败"),
    "conv.note.empty": ("the model returned no rewrite", "模型没有给出改写"),
    "conv.note.not_a_question": ("the model's rewrite was not a single question", "模型的改写不是一个问题"),
    "conv.note.dropped_words": ("the model's rewrite dropped the words of your question",
                                "模型的改写丢掉了你问题中的词"),
    "conv.note.unchanged": ("the rewrite added nothing from the conversation", "改写没有从对话中补充任何内容"),
    "answer.model_ready": ("{msg} is ready ({total} MB)", "{msg} 已就绪（{total} MB）"),
    "answer.asking_across": ("the passages are about something else: asking the {lang} documents “{q}”…",
                             "段落说的是别的内容：改问{lang}文档“{q}”…"),
    "answer.asked_as": ("asked the {lang} documents: “{q}”", "改问{lang}文档：“{q}”"),
    "answer.reading": ("reading {n} tokens…", "正在阅读 {n} 个词元…"),
    "answer.passages": ("chose {n} of {total} passages", "从 {total} 个段落中选出 {n} 个"),
    "answer.elapsed": ("{doing} · {s} s", "{doing} · {s} 秒"),
    "answer.took": ("{s} s", "{s} 秒"),
    "answer.cf_step": ("step {cur}/{total}: {stage}", "第 {cur}/{total} 步：{stage}"),
    "answer.done": ("done · {n} citations", "完成 · {n} 处引用"),
    "answer.cite_dropped": ("{n} unsupported citation(s) removed", "已移除 {n} 处无依据的引用"),
    "answer.cite_dropped_tip": ("[{n}] removed: its passage does not hold “{sentence}”",
                                "已移除 [{n}]：该段落不包含“{sentence}”"),
    "answer.done_one": ("done · 1 citation", "完成 · 1 处引用"),
    "answer.copied_example": ("⚠ not an answer: the model repeated the prompt's worked example, not your documents",
                              "⚠ 这不是答案：模型重复了提示词中的示例，而不是根据你的文档回答"),
    "answer.unsupported": ("⚠ no passage holds it", "⚠ 段落不含此回答"),
    "answer.doubted": ("⚠ the passages may not answer this", "⚠ 段落可能不含答案"),
    "answer.doubted_tip": ("Asked whether these passages hold the answer, the model said yes with only {yes} "
                           "(below {need}): check the answer against the sources. The setting “Ask the model "
                           "whether the passages hold the answer” can say “not in your documents” instead.",
                           "被问到这些段落中是否有答案时，模型回答“有”的把握只有 {yes}（低于 {need}）：请对照资料核实。"
                           "设置“先让模型判断段落中是否有答案”可改为说明“文档中没有答案”。"),
    "answer.unsupported_tip": ("No passage the model read holds most of what this answer adds to the question: "
                               "check it against the sources before relying on it.",
                               "模型所读的段落都不包含这个回答在问题之外所说的大部分内容：使用前请对照资料核实。"),
    "answer.done_matched": ("done · {n} citations ({m} matched by words)", "完成 · {n} 处引用（{m} 处按词语匹配）"),
    "answer.done_matched_one": ("done · 1 citation (matched by words)", "完成 · 1 处引用（按词语匹配）"),
    "answer.done_invalid": ("done · {n} citations · not among the sources: {bad}",
                            "完成 · {n} 处引用 · 不在来源之中：{bad}"),
    "answer.empty": ("the model returned no text", "模型没有返回文本"),
    "needs.button": ("Which sources does it need?", "哪些资料是必需的？"),
    "needs.tip": ("Answer the question again without each cited source in turn: a source whose absence changes "
                  "the answer is needed. One model answer per cited source.",
                  "依次去掉每条被引用的资料再回答一次：去掉后答案改变的资料就是必需的。每条引用资料需模型回答一次。"),
    "needs.starting": ("checking which sources the answer needs…", "正在检查答案需要哪些资料…"),
    "needs.running": ("answering again without source {k} of {n}: {title}…",
                      "去掉第 {k}/{n} 条资料后重新回答：{title}…"),
    "needs.needed": ("[{n}] {title}: needed: without it the answer says “{without}”",
                     "[{n}] {title}：必需，去掉后答案变为“{without}”"),
    "needs.not_needed": ("[{n}] {title}: not needed: without it the answer stays the same (agreement {f1})",
                         "[{n}] {title}：非必需，去掉后答案不变（一致度 {f1}）"),
    "needs.none": ("the answer cites no source it was given", "答案没有引用所给的资料"),
    "needs.took": ("{k} answers again, {s} s", "重新回答 {k} 次，用时 {s} 秒"),
    "needs.without_tip": ("without [{n}]: {without}", "去掉 [{n}]：{without}"),
    "needs.failed": ("could not check the sources: {msg}", "无法检查资料：{msg}"),
    "answer.abstained": ("not in your documents: the model was not asked", "文档中没有答案：未询问模型"),
    "answer.abstained_text": ("Not in your documents. None of the question's words occur in this library, and "
                              "no passage stands out from the rest, so no answer was written. Rephrase it in the "
                              "documents' words, or add the documents that hold the answer.",
                              "文档中没有答案。问题中的词语都不在这个文库里，也没有哪段文字明显比其余的更相关，所以没有"
                              "生成回答。可以换用文档里的说法再问，或者添加包含答案的文档。"),
    "answer.abstained_tip": ("{known} of the question's {terms} search terms occur in this library ({coverage}); "
                             "the best passage stands {lift} above the question's mean similarity to the library. "
                             "The setting “Say ‘not in your documents’” turns this off.",
                             "问题的 {terms} 个检索词中有 {known} 个出现在本文库（{coverage}）；"
                             "最相关段落比问题与文库的平均相似度高 {lift}。可在设置“文档中没有答案时不作答”中关闭。"),
    "answer.not_held": ("not in your documents: judged from the passages", "文档中没有答案：依据段落判断"),
    "answer.not_held_text": ("Not in your documents. The model read the passages listed below and judged that "
                             "they do not hold the answer, so no answer was written. Rephrase the question in the "
                             "documents' words, or add the documents that hold the answer.",
                             "文档中没有答案。模型阅读了下面列出的段落，判断其中没有这个问题的答案，所以没有生成回答。"
                             "可以换用文档里的说法再问，或者添加包含答案的文档。"),
    "answer.not_held_tip": ("Asked whether these passages hold the answer, the model said yes with {yes} "
                            "(an answer is written from {need}). The setting “Ask the model whether the passages "
                            "hold the answer” turns this off.",
                            "被问到这些段落中是否有答案时，模型回答“有”的把握为 {yes}（达到 {need} 才生成回答）。"
                            "可在设置“先让模型判断段落中是否有答案”中关闭。"),
    "answer.unrelated": ("not in your documents: the passages are about something else",
                         "文档中没有答案：段落说的是别的内容"),
    "answer.unrelated_text": ("Not in your documents. The model read the question after the passages listed below "
                              "and found it no more expected than with no passages at all: they are about "
                              "something else, so no answer was written. Rephrase the question in the documents' "
                              "words, or add the documents that hold the answer.",
                              "文档中没有答案。模型读过下面列出的段落后再读这个问题，并不比不读任何段落时更“意料之中”："
                              "这些段落说的是别的内容，所以没有生成回答。可以换用文档里的说法再问，或者添加包含答案的文档。"),
    "answer.unrelated_tip": ("Per word of the question, the passages changed its log-likelihood by {lift} (an "
                             "answer is written from {need}). The setting “Check that the passages bear on the "
                             "question” turns this off.",
                             "按问题的每个词计，段落使它的对数似然变化了 {lift}（达到 {need} 才生成回答）。"
                             "可在设置“检查段落是否与问题相关”中关闭。"),
    "answer.unheld": ("not in your documents: judged from the passages and the answer",
                      "文档中没有答案：依据段落和回答判断"),
    "answer.unheld_text": ("Not in your documents. The model judged that the passages listed below do not hold the "
                           "answer, and none of them holds what it wrote, shown here only for reference:",
                           "文档中没有答案。模型判断下面列出的段落中没有这个问题的答案，它写出的内容也不在任何段落中；"
                           "仅供参考："),
    "answer.unheld_tip": ("Asked whether these passages hold the answer, the model said yes with {yes} (below {need}), "
                          "and no passage it read holds most of what its answer adds to the question. Either alone "
                          "only marks the answer.",
                          "被问到这些段落中是否有答案时，模型回答“有”的把握为 {yes}（低于 {need}），"
                          "而且它所读的段落都不包含回答在问题之外所说的大部分内容。只有其中一项时，只标注回答。"),
    "answer.other_language": ("This library also holds documents in {lang}, which a question in another language "
                              "reaches only through its translation: ask it in {lang}, or turn on “Search across "
                              "languages” in Settings.",
                              "这个文库里还有{lang}文档，用另一种语言提问时只有翻译后才能检索到：请用{lang}再问一次，"
                              "或在设置中打开“跨语言检索”。"),
    "lang.zh": ("Chinese", "中文"),
    "lang.en": ("English", "英文"),
    "answer.said_not_found": ("not in your documents: the answer says so", "文档中没有答案：回答如是说"),
    "answer.said_not_found_text": ("Not in your documents. The model read the passages listed below and wrote:",
                                   "文档中没有答案。模型阅读了下面列出的段落后写道："),
    "answer.said_not_found_tip": ("The answer says the sources do not hold it. Rephrase the question in the documents' "
                                  "words, or add the documents that hold the answer.",
                                  "回答说资料中没有答案。可以换用文档里的说法再问，或者添加包含答案的文档。"),
    "answer.failed": ("failed: {msg}", "失败：{msg}"),
    "answer.stopped": ("stopped", "已停止"),
    "answer.cite_tip": ("Open {title} at page {page}", "打开“{title}”第 {page} 页"),
    "answer.cite_matched_tip": ("Matched by its words to source [{n}]: {title}, page {page} (the model did not cite "
                                "this sentence)",
                                "按词语匹配到来源 [{n}]：{title}，第 {page} 页（模型未为此句标注来源）"),
    "answer.cite_invalid_tip": ("[{n}] is not one of the sources given to the model", "[{n}] 不是提供给模型的来源"),
    "answer.sources": ("Sources", "来源"),
    "answer.sources_tip": ("Show the sources given to the model; translated passages beside their originals",
                           "显示提供给模型的来源；译文与原文并排"),
    "answer.src_n": ("n", "编号"),
    "answer.src_doc": ("Document", "文档"),
    "answer.src_given": ("Given to the model", "提供给模型的文本"),
    "answer.src_original": ("Original (if translated)", "原文（如经翻译）"),
    "answer.same_as_given": ("(the same: the model read the original)", "（同左：模型读的就是原文）"),
    # ------------------------------------------------------------------ viewer
    "viewer.title": ("Document viewer", "文档查看器"),
    "viewer.open_file": ("Open file", "打开文件"),
    "viewer.open_file_tip": ("Open the document in its usual program", "用默认程序打开该文档"),
    "viewer.prev": ("Previous page", "上一页"),
    "viewer.next": ("Next page", "下一页"),
    "viewer.legend_region": ("The passage", "匹配段落"),
    "viewer.loading": ("Loading…", "正在加载…"),
    "viewer.page_status": ("Page {page} of {n} · {terms} keyword marks on this page",
                           "第 {page} 页，共 {n} 页 · 本页标出 {terms} 处关键词"),
    # A PDF with printed page labels: the label first (what citations and the book say), then the
    # position in the file (what the page box counts).
    "viewer.page_status_printed": ("Page {label} ({page} of {n} in this file) · {terms} keyword marks on this page",
                                   "第 {label} 页（本文件第 {page} 页，共 {n} 页）· 本页标出 {terms} 处关键词"),
    "viewer.page_of_printed": ("/ {n} · p. {label}", "/ {n} · 第 {label} 页"),
    "viewer.text_status": ("{terms} keyword marks · {region}", "标出 {terms} 处关键词 · {region}"),
    "viewer.region_found": ("the passage is marked", "已标出匹配段落"),
    "viewer.region_missing": ("the passage could not be located in the file (it may have changed)",
                              "未能在文件中找到匹配段落（文件可能已修改）"),
    # ------------------------------------------------------------------ trace
    "trace.title": ("CF-RAG trace", "CF-RAG 推理轨迹"),
    "trace.empty": ("Ask a question with “Generate answers” on to see how CF-RAG decides.",
                    "勾选“生成回答”后提问，即可查看 CF-RAG 的决策过程。"),
    "trace.waiting": ("CF-RAG is queued after the answers…", "CF-RAG 将在回答之后运行…"),
    "trace.abstained": ("CF-RAG did not run: the question is not answered by your documents.",
                        "CF-RAG 未运行：你的文档中没有这个问题的答案。"),
    "trace.preparing": ("CF-RAG is starting: {stage}…", "CF-RAG 正在启动：{stage}…"),
    "trace.running": ("CF-RAG is running: {stage} (step {cur}/{total})… The trace appears when it ends.",
                      "CF-RAG 正在运行：{stage}（第 {cur}/{total} 步）……结束后显示推理轨迹。"),
    "trace.off": ("Answers are off, so CF-RAG did not run.", "未开启回答生成，因此没有运行 CF-RAG。"),
    "trace.cf_disabled": ("CF-RAG is switched off, so it did not run.", "CF-RAG 已关闭，因此没有运行。"),
    "trace.not_run": ("CF-RAG did not run; see the message above.", "CF-RAG 未运行，请查看上方的提示。"),
    "trace.stopped": ("CF-RAG was stopped.", "CF-RAG 已停止。"),
    "trace.summary": ("{n} counterfactual questions kept, {rejected} rejected · "
                      "{pool} passages retrieved, {kept} kept · "
                      "{k} clusters · {m} hypotheses · λ = {lam} · s(q,e) by {scorer}",
                      "保留 {n} 个反事实问题，拒绝 {rejected} 个 · 检索到 {pool} 个段落，保留 {kept} 个 · "
                      "{k} 个簇 · {m} 个假设 · λ = {lam} · s(q,e) 由 {scorer} 计算"),
    "trace.substitute": (" (substitute, not a cross-encoder)", "（替代方案，并非交叉编码器）"),
    "trace.counterfactuals": ("Counterfactual questions", "反事实问题"),
    "trace.evidence": ("Evidence", "证据"),
    "trace.evidence_note": ("Status “kept”: the passage passed the relevance, quality and duplicate filters and goes "
                            "to the hypotheses, whatever its Δ. Δ = s(q,e) − max s(q',e): above 0 (green) the "
                            "passage supports the question more than any counterfactual and raises φ_causal; "
                            "below 0 (red) it fits a counterfactual better and lowers it.",
                            "状态“保留”：该段落通过了相关性、质量和去重过滤，无论 Δ 如何都会提供给假设。"
                            "Δ = s(q,e) − max s(q',e)：大于 0（绿色）表示它对原问题的支持强于任何反事实问题，"
                            "会提高 φ_causal；小于 0（红色）表示它更符合某个反事实问题，会降低 φ_causal。"),
    "trace.cf_note": ("Similarity = cos(E(q), E(q')): a counterfactual must stay on the topic. Info ranks them: "
                      "semantic divergence Div_sem (how differently q' is phrased) + answer divergence Div_ans "
                      "(1 when the closed-book answers to q and q' differ) + domain relevance Rel.",
                      "相似度 = cos(E(q), E(q'))：反事实问题须保持同一主题。信息量用于排序："
                      "语义差异 Div_sem（q' 的表述差异）+ 回答差异 Div_ans（q 与 q' 的闭卷回答不同时为 1）"
                      "+ 领域相关性 Rel。"),
    "trace.hy_note": ("φ_coh: how well the answer agrees with its evidence and the question · φ_causal: the mean "
                      "Δ of its evidence (does it rest on passages that answer q rather than a counterfactual) · "
                      "Ψ = (1 − λ)·φ_coh + λ·φ_causal ranks the hypotheses; λ = {lam} is the weight of the causal "
                      "part.",
                      "φ_coh：回答与其证据及问题的吻合程度 · φ_causal：其证据 Δ 的平均值（它是否依赖回答 q "
                      "而非反事实问题的段落）· Ψ = (1 − λ)·φ_coh + λ·φ_causal 用于给假设排序；"
                      "λ = {lam} 为因果部分的权重。"),
    "trace.info_cell": ("{info} (Div_sem {d} · Div_ans {a} · Rel {r})",
                        "{info}（Div_sem {d} · Div_ans {a} · Rel {r}）"),
    "trace.no_rationale": ("(the model gave no rationale)", "（模型没有给出理由）"),
    "trace.no_answer": ("(the model gave no answer)", "（模型没有给出回答）"),
    "trace.hyp_rank_tip": ("Rank {rank} by Ψ", "按 Ψ 排第 {rank} 名"),
    "trace.h.hyp": ("Hypothesis", "假设"),
    "trace.clusters": ("Clusters and evidence subsets", "聚类与证据子集"),
    "trace.hypotheses": ("Hypotheses", "假设"),
    "trace.decision": ("Decision", "决策"),
    "trace.kept": ("kept", "保留"),
    "trace.invalid": ("rejected: {why}", "拒绝：{why}"),
    "trace.not_top": ("not among the most informative: {why}", "信息量不在前列：{why}"),
    "trace.cf_tip": ("Closed-book answer to q: {a}\nto this question: {b}\nanswer overlap F1 {f1}",
                     "原问题的闭卷回答：{a}\n本问题的闭卷回答：{b}\n回答重合 F1：{f1}"),
    "trace.sim_tip": ("cos(E(q), E(q')): same topic when high", "cos(E(q), E(q'))：越高说明主题越接近"),
    "trace.info_tip": ("Info = semantic divergence {d}, answer divergence {a}, domain relevance {r}",
                       "信息量：语义差异 {d}，回答差异 {a}，领域相关性 {r}"),
    "trace.s_q_tip": ("s(q,e), normalised (raw {raw})", "s(q,e)，归一化后（原始值 {raw}）"),
    "trace.max_cf_tip": ("max over counterfactuals of s(q',e), reached by {q}",
                         "反事实问题 s(q',e) 的最大值，来自 {q}"),
    "trace.margin_tip": ("s(q,e) − max s(q',e)", "s(q,e) − max s(q',e)"),
    "trace.coh_tip": ("φ_coh from answer–evidence similarity {a}, relevance {r}, presence {p}",
                      "φ_coh 由回答与证据的相似度 {a}、相关性 {r}、出现度 {p} 计算"),
    "trace.causal_tip": ("φ_causal = mean over its evidence of s(q,e) − max s(q',e)",
                         "φ_causal = 其证据上 s(q,e) − max s(q',e) 的平均值"),
    "trace.psi_tip": ("Ψ = (1 − λ)·φ_coh + λ·φ_causal, λ = {lam}", "Ψ = (1 − λ)·φ_coh + λ·φ_causal，λ = {lam}"),
    "trace.spectral": ("Spectral clustering: {k} clusters (asked {asked}), σ = {sigma}, eigenvalues {eig}",
                       "谱聚类：{k} 个簇（设定 {asked}），σ = {sigma}，特征值 {eig}"),
    "trace.cluster": ("Cluster {k} ({n} passages): {members}", "簇 {k}（{n} 个段落）：{members}"),
    "trace.subset": ("Subset {j}: {members} · cluster weights {w}", "子集 {j}：{members} · 簇权重 {w}"),
    "trace.decision_line": ("Decision: {kind} · agreement {agr} ({measure}) against threshold {thr}",
                            "决策：{kind} · 一致度 {agr}（{measure}），阈值 {thr}"),
    "trace.decision_not_run": ("Decision: {kind}; the counterfactual paths did not run, so no agreement was measured",
                               "决策：{kind}；反事实路径没有运行，因此没有测量一致度"),
    "trace.agreement_measure": ("mean pairwise token F1 of normalised answers",
                                "各假设答案规范化后两两词元 F1 的平均值"),
    "trace.chosen": ("Chosen hypothesis: {j}", "选中的假设：{j}"),
    "trace.synth_from": ("Synthesised from hypotheses: {js}", "由以下假设综合：{js}"),
    "trace.reread_from": ("Answered again from all kept evidence, no candidate shown: {ps}",
                          "不提供候选答案，根据全部保留证据重新回答：{ps}"),
    "trace.final": ("Final answer: {a}", "最终回答：{a}"),
    "trace.plain_title": ("How CF-RAG reached its answer", "CF-RAG 如何得出回答"),
    "trace.details": ("Details", "详细信息"),
    "trace.details_tip": ("The numbers behind the sentences: Div_sem, Div_ans, Rel and Info of the contrasting "
                          "questions, s(q,e) and Δ of the passages, φ_coh, φ_causal and Ψ of the drafts, the "
                          "agreement",
                          "这些句子背后的数值：对照问题的 Div_sem、Div_ans、Rel 与信息量，段落的 s(q,e) 与 Δ，"
                          "候选回答的 φ_coh、φ_causal 与 Ψ，以及一致度"),
    "trace.hyp_scores": ("{j}: φ_coh {coh} · φ_causal {causal} · Ψ {psi}",
                         "{j}：φ_coh {coh} · φ_causal {causal} · Ψ {psi}"),
    "trace.agreement": ("Agreement of the drafts {agr} (they agree from {thr})",
                        "候选回答的一致度 {agr}（达到 {thr} 即为一致）"),
    "trace.all_numbers": ("Every number is in the “CF-RAG trace” tab.", "全部数值见“CF-RAG 推理轨迹”标签页。"),
    "trace.rationale": ("Rationale: {r}", "理由：{r}"),
    "trace.h.kept": ("", ""),
    "trace.h.question": ("Question", "问题"),
    "trace.h.kind": ("Change", "变换"),
    "trace.h.sim": ("Similarity", "相似度"),
    "trace.h.info": ("Info", "信息量"),
    "trace.h.reason": ("Kept / rejected because", "保留/拒绝原因"),
    "trace.h.id": ("#", "#"),
    "trace.h.passage": ("Passage", "段落"),
    "trace.h.by": ("Found by", "检索来源"),
    "trace.h.status": ("Status", "状态"),
    "trace.h.cluster": ("Cluster", "簇"),
    "trace.h.answer": ("Answer", "回答"),
    "trace.h.rationale": ("Rationale", "理由"),
    "trace.h.subset": ("Evidence", "证据子集"),
    "trace.status.kept": ("kept", "保留"),
    "trace.status.duplicate": ("duplicate", "重复"),
    "trace.status.low_quality": ("low quality", "质量低"),
    "trace.status.below_cut": ("not relevant enough", "相关性不足"),
    "trace.decision.select": ("the best-supported hypothesis was selected", "选择了证据支持最强的假设"),
    "trace.decision.synthesize": ("the hypotheses disagreed, so an answer was synthesised",
                                  "假设之间不一致，因此综合出一个回答"),
    "trace.decision.reread": ("the hypotheses disagreed, so the model read all kept evidence again",
                              "假设之间不一致，因此模型重新阅读了全部保留证据"),
    "trace.decision.synthesis_fallback": ("synthesis failed; the best hypothesis was used",
                                          "综合失败，使用了最佳假设"),
    "trace.decision.single": ("one hypothesis over all evidence", "基于全部证据的单一假设"),
    "trace.decision.no_evidence": ("no evidence was found", "没有找到证据"),
    "trace.decision.standard": ("the standard answer stands", "保留标准回答"),
    # ------------------------------------------------------------------ chart
    "chart.baseline": ("Baseline", "基线"),
    "chart.causal": ("Causal rerank", "因果重排序"),
    "chart.empty": ("Ask a question to see how the ranks move.", "提问后即可看到名次的变化。"),
    # ------------------------------------------------------------------ report
    "report.title": ("Decision report", "决策报告"),
    "report.question": ("Question:", "问题："),
    "report.created": ("Created {when}", "生成于 {when}"),
    "report.why": ("Why each document is where it is", "每篇文档为何排在此处"),
    "report.answers": ("Answers", "回答"),
    "report.nothing": ("Ask a question first; the report describes the current question.",
                       "请先提问；报告描述的是当前的问题。"),
    "report.save_title": ("Save the decision report (HTML; a JSON file is written beside it)",
                          "保存决策报告（HTML；同时在旁边写入 JSON 文件）"),
    "report.saved": ("Report saved: {path}", "报告已保存：{path}"),
    # ------------------------------------------------------------------ settings
    "settings.title": ("Settings", "设置"),
    "settings.note": ("Defaults are the papers' values. Changes to models take effect on the next question; "
                      "keyword settings apply to documents added afterwards.",
                      "默认值取自论文。模型的更改在下一次提问时生效；关键词设置对之后添加的文档生效。"),
    "settings.tab.models": ("Models", "模型"),
    "settings.tab.retrieval": ("Retrieval", "检索"),
    "settings.tab.cfrag": ("CF-RAG", "CF-RAG"),
    "settings.tab.generation": ("Generation", "生成"),
    "settings.tab.interface": ("Interface", "界面"),
    "settings.browse": ("Browse…", "浏览…"),
    "settings.embedded": ("Embedded", "内置"),
    "settings.embedded_tip": ("Use the model that ships with the app (works offline)",
                              "使用随应用提供的模型（可离线使用）"),
    "settings.embedded_fast": ("Fast", "快速"),
    "settings.embedded_fast_tip": ("Use the smaller embedded model Qwen2.5-Coder-0.5B: answers in about half the "
                                   "time, noticeably less accurate",
                                   "使用较小的内置模型 Qwen2.5-Coder-0.5B：回答约快一倍，但准确度明显较低"),
    "settings.choose_file": ("Choose a GGUF model file", "选择 GGUF 模型文件"),
    "settings.choose_folder": ("Choose a model folder", "选择模型文件夹"),
    "settings.threads_auto": ("automatic (0)", "自动（0）"),  # the description under it says what 0 does
    "settings.doctor": ("Check models", "检查模型"),
    "settings.doctor_running": ("Checking…", "正在检查…"),
    "settings.defaults": ("Papers' defaults", "恢复论文默认值"),
    "settings.invalid": ("Not saved: {detail}", "未保存：{detail}"),
    "settings.need_generator": ("invalid setting models.generator: choose a GGUF file or “embedded”",
                                "设置 models.generator 无效：请选择 GGUF 文件或“内置”"),
    "set.models.generator": ("Generator model", "生成模型"),
    "set.models.generator.tip": ("“embedded” or the path of a GGUF file", "“embedded”（内置）或 GGUF 文件的路径"),
    "set.models.generator_backend": ("Generator runs", "生成模型运行方式"),
    "set.models.generator_backend.tip": ("In this app (llama.cpp) or on an OpenAI-compatible server",
                                         "在本应用中运行（llama.cpp），或在兼容 OpenAI 的服务器上运行"),
    "set.models.openai_base_url": ("Server address", "服务器地址"),
    "set.models.openai_base_url.tip": ("Base URL of the OpenAI-compatible server", "兼容 OpenAI 的服务器的基础地址"),
    "set.models.openai_model": ("Server model name", "服务器模型名"),
    "set.models.openai_model.tip": ("Model name sent to the server", "发送给服务器的模型名称"),
    "set.models.embedder": ("Embedder (E)", "向量模型（E）"),
    "set.models.embedder.tip": ("“embedded” or a local model folder (e.g. BAAI/bge-m3); changing it needs a re-embed",
                                "“embedded”（内置）或本地模型文件夹（如 BAAI/bge-m3）；更换后需要重新向量化"),
    "set.models.reranker": ("Cross-encoder", "交叉编码器"),
    "set.models.reranker.tip": ("A local reranker folder (e.g. bge-reranker-v2-m3); empty: none (a labelled substitute "
                                "scores s(q,e))",
                                "本地重排序模型文件夹（如 bge-reranker-v2-m3）；"
                                "留空表示不使用（由标明的替代方案计算 s(q,e)）"),
    "set.models.model_dir": ("Model folder", "模型文件夹"),
    "set.models.model_dir.tip": ("Where model files are kept; empty: the user data folder",
                                 "存放模型文件的位置；留空表示用户数据文件夹"),
    "set.models.n_ctx": ("Context length (tokens)", "上下文长度（词元）"),
    "set.models.n_ctx.tip": ("How much text the generator reads at once", "生成模型一次能读取的文本长度"),
    "set.models.threads": ("Threads", "线程数"),
    "set.models.threads.tip": ("CPU threads the models may use. 0: automatic — the generator takes one thread per "
                               "physical CPU core, the embedder and the index their library's own default "
                               "(OMP_NUM_THREADS is respected)",
                               "模型可使用的 CPU 线程数。0 表示自动：生成模型每个物理 CPU 核心用一个线程，"
                               "向量模型和索引使用其所用库的默认值（会遵循 OMP_NUM_THREADS）"),
    "set.retrieval.level": ("Rank", "排序单位"),
    "set.retrieval.level.tip": ("Whole documents or passages", "整篇文档或段落"),
    "set.retrieval.k": ("Candidates k", "候选数 k"),
    "set.retrieval.k.tip": ("How many baseline candidates are re-ranked (paper: 20)",
                            "参与重排序的基线候选数量（论文：20）"),
    "set.retrieval.theta": ("Similarity threshold θ", "相似度阈值 θ"),
    "set.retrieval.theta.tip": ("Candidates below this cosine are dropped (Eq. 2)",
                                "余弦低于该值的候选将被丢弃（式 2）"),
    "set.retrieval.tau": ("Absorption threshold τ", "吸收阈值 τ"),
    "set.retrieval.tau.tip": ("τ: a document term whose cosine with a question term is at least τ counts as "
                              "shared (A) and is removed before s_c (Eq. 3; paper: 0.6). “calibrate” sets it "
                              "from this library's own term cosines",
                              "τ：与某个问题词的余弦不低于 τ 的文档词算作共有（A 类），在计算 s_c 前移除"
                              "（式 3；论文：0.6）。“自动校准”根据本文档库自身的词余弦设定"),
    "set.retrieval.hybrid_weight": ("Hybrid weight w", "混合权重 w"),
    "set.retrieval.hybrid_weight.tip": ("w·s_sim + (1−w)·s_c after min-max normalisation",
                                        "归一化后 w·s_sim + (1−w)·s_c"),
    "set.retrieval.default_method": ("Causal column shows", "因果列显示"),
    "set.retrieval.default_method.tip": ("Pure s_c, the hybrid, or what the calibration gate decided",
                                         "纯 s_c、混合得分，或由校准门控决定"),
    "set.retrieval.keyword_k": ("Keyword candidates (BM25)", "关键词候选（BM25）"),
    "set.retrieval.keyword_k.tip": ("The best BM25 matches join the similarity candidates, and the answers read "
                                    "the two orders merged (0: similarity only)",
                                    "BM25 最佳匹配加入相似度候选，回答读取两种排序的合并结果（0：仅相似度）"),
    "set.retrieval.cross_language": ("Search across languages", "跨语言检索"),
    "set.retrieval.cross_language.tip": ("When the library holds Chinese and English documents, the local model "
                                         "translates the question after the columns are shown, and the re-ranked "
                                         "columns and the answers merge both rankings (a model call per question)",
                                         "文档库同时含中英文文档时，结果列显示后由本地模型翻译问题，重排序列和回答"
                                         "合并两种语言问题的排序（每个问题调用一次模型）"),
    "set.retrieval.cross_language_timeout_s": ("Question translation time limit (s)", "问题翻译时限（秒）"),
    "set.retrieval.cross_language_timeout_s.tip": ("A translation that takes longer is dropped and the question "
                                                   "is ranked as typed",
                                                   "翻译超过此时限则放弃，只按原问题排序"),
    "set.retrieval.keyword_variant": ("Keyword extraction", "关键词提取"),
    "set.retrieval.keyword_variant.tip": ("“as in the paper”: the paper's extraction; “improved”: stemming and "
                                          "domain words",
                                          "“与论文相同”：论文的方法；“改进”：词干化并识别领域词"),
    "set.retrieval.empty_b_rule": ("When B is empty", "B 为空时"),
    "set.retrieval.score_variant": ("s_c read as", "s_c 的计算方式"),
    "set.retrieval.score_variant.tip": ("The paper's cosine, or one put on the encoder's own scale "
                                        "(docs/evaluation.md §1.1 compares them)",
                                        "论文中的余弦，或按编码器自身尺度校正的版本（docs/evaluation.md §1.1 有比较）"),
    "set.retrieval.empty_b_rule.tip": ("demote the document, or fall back to s_sim", "将文档排到后面，或回退到 s_sim"),
    "set.retrieval.query_keywords": ("Question keywords |K_q|", "问题关键词数 |K_q|"),
    "set.retrieval.query_keywords.tip": ("|K_q|: how many keywords K_q are taken from the question (paper: 10); "
                                         "a document's keywords that match one of them form its shared set A, "
                                         "the rest its residual set B that s_c is computed from",
                                         "|K_q|：从问题中提取的关键词 K_q 的数量（论文：10）；文档关键词中与其匹配的"
                                         "构成共有集合 A，其余构成计算 s_c 所用的剩余集合 B"),
    "set.retrieval.doc_keywords": ("Document keywords |K_d|", "文档关键词数 |K_d|"),
    "set.retrieval.doc_keywords.tip": ("How many keywords K_d are kept per document; they split into A and B "
                                       "(paper: 15)",
                                       "每篇文档保留的关键词 K_d 的数量；它们被分为 A 类和 B 类（论文：15）"),
    "set.cfrag.n_counterfactuals": ("Counterfactuals N", "反事实问题数 N"),
    "set.cfrag.n_counterfactuals.tip": ("How many counterfactual questions q' are kept after validation (paper: 3)",
                                        "验证后保留的反事实问题 q' 的数量（论文：3）"),
    "set.cfrag.n_candidates": ("Counterfactual candidates", "反事实候选数"),
    "set.cfrag.n_candidates.tip": ("Written before validation keeps the best N",
                                   "先生成这么多，再经验证保留最佳的 N 个"),
    "set.cfrag.n_clusters": ("Clusters K", "簇数 K"),
    "set.cfrag.n_clusters.tip": ("Evidence is split into K clusters by spectral clustering (paper: 4)",
                                 "用谱聚类将证据分为 K 个簇（论文：4）"),
    "set.cfrag.n_hypotheses": ("Hypotheses M", "假设数 M"),
    "set.cfrag.n_hypotheses.tip": ("M answers written from M evidence subsets, then arbitrated (paper: 3)",
                                   "从 M 个证据子集写出 M 个回答，再进行仲裁（论文：3）"),
    "set.cfrag.lam": ("λ (causal weight in Ψ)", "λ（Ψ 中的因果权重）"),
    "set.cfrag.lam.tip": ("Ψ = (1−λ)·φ_coh + λ·φ_causal (paper: 0.4)", "Ψ = (1−λ)·φ_coh + λ·φ_causal（论文：0.4）"),
    "set.cfrag.theta_sim": ("Counterfactual similarity θ_sim", "反事实相似度 θ_sim"),
    "set.cfrag.theta_sim.tip": ("A counterfactual must stay on topic: cos(E(q),E(q')) ≥ θ_sim",
                                "反事实问题须保持同一主题：cos(E(q),E(q')) ≥ θ_sim"),
    "set.cfrag.theta_dedup": ("Duplicate threshold", "去重阈值"),
    "set.cfrag.theta_dedup.tip": ("θ_dedup: passages whose cosine is at least this (−1 to 1) are merged as "
                                  "duplicates; read on the encoder's own scale when cosines are rescaled",
                                  "θ_dedup：余弦不低于该值（−1 到 1）的段落视为重复并合并；"
                                  "余弦重新标定时按编码器自身的尺度读取"),
    "set.cfrag.agreement_threshold": ("Agreement threshold", "一致度阈值"),
    "set.cfrag.agreement_threshold.tip": ("Hypotheses agreeing at least this much: select; otherwise synthesise",
                                          "假设一致度不低于该值时选择，否则综合"),
    "set.cfrag.quality_min": ("Minimum evidence quality", "最低证据质量"),
    "set.cfrag.quality_min.tip": ("Passages below this quality are dropped", "质量低于该值的段落将被丢弃"),
    "set.cfrag.keep_standard": ("Start from the standard answer", "以标准回答为起点"),
    "set.cfrag.keep_standard.tip": ("Keep the standard answer when a passage it read holds it; CF-RAG answers "
                                    "again only otherwise, and replaces it only with an answer its own "
                                    "passages hold",
                                    "标准回答被其读过的资料支持时直接保留；否则 CF-RAG 重新回答，"
                                    "且只有当新回答被其资料支持时才替换标准回答"),
    "set.cfrag.retrieve_k": ("Passages per query", "每个查询检索段落数"),
    "set.cfrag.retrieve_k.tip": ("Retrieved for q and for each counterfactual",
                                 "对原问题和每个反事实问题分别检索的数量"),
    "set.cfrag.evidence_per_hypothesis": ("Evidence per hypothesis", "每个假设的证据数"),
    "set.cfrag.evidence_per_hypothesis.tip": ("Passages sampled into each subset", "每个证据子集抽取的段落数"),
    "set.cfrag.use_counterfactuals": ("Use counterfactuals", "使用反事实问题"),
    "set.cfrag.use_counterfactuals.tip": ("Off: ablation without q' (φ_causal = 0)",
                                          "关闭：不使用 q' 的消融实验（φ_causal = 0）"),
    "set.cfrag.read_passages": ("Paragraphs read per evidence", "每条证据读取的段落数"),
    "set.cfrag.read_passages.tip": ("Each evidence chunk is read through its best paragraphs for the question; "
                                    "0 reads the chunk from its start, cut to fit",
                                    "每个证据块只读取与问题最相关的段落；0 表示从块首读起，截断到可容纳的长度"),
    "set.cfrag.use_division": ("Divide evidence into subsets", "将证据划分为子集"),
    "set.cfrag.use_division.tip": ("Off: one hypothesis over all evidence", "关闭：用全部证据生成一个假设"),
    "set.generation.temperature": ("Temperature", "温度"),
    "set.generation.temperature.tip": ("0: deterministic; higher: more varied", "0 表示确定性输出；越高越多样"),
    "set.generation.max_tokens": ("Maximum answer length (tokens)", "回答最大长度（词元）"),
    "set.generation.max_tokens.tip": ("The answer stops after this many tokens", "回答达到该长度后停止"),
    "set.generation.thinking": ("Let the model think first", "让模型先思考"),
    "set.generation.thinking.tip": ("For models with a thinking mode (e.g. Qwen3); slower",
                                    "适用于带思考模式的模型（如 Qwen3）；速度较慢"),
    "set.generation.translate": ("Translate sources", "翻译来源"),
    "set.generation.translate.tip": ("Passages in another language than the question are translated before "
                                     "answering (a model call per passage before the first word)",
                                     "与问题语言不同的段落会在回答前被翻译（在第一个字之前每段调用一次模型）"),
    "set.generation.passages": ("Answer from passages", "基于段落回答"),
    "set.generation.passages.tip": ("The model reads the paragraphs of the top chunks that match the question, "
                                    "each with its title, section and page, instead of whole chunks",
                                    "模型阅读排名靠前的文本块中与问题最相关的段落（附标题、章节和页码），而不是整个文本块"),
    "set.generation.max_passages": ("Passages per answer", "每个回答的段落数"),
    "set.generation.max_passages.tip": ("At most this many passages are given to the model", "最多提供给模型的段落数"),
    "set.generation.abstain": ("Say “not in your documents”", "文档中没有答案时不作答"),
    "set.generation.abstain.tip": ("When none of the question's words are the library's and no passage stands "
                                   "out, say so instead of asking the model", "问题的词语都不在文库中、且没有"
                                   "明显相关的段落时，直接说明，不询问模型"),
    "set.generation.check_relevance": ("Check that the passages bear on the question",
                                       "检查段落是否与问题相关"),
    "set.generation.check_relevance.tip": ("Before answering, the model reads the question after the passages and "
                                           "after no passages; when the passages do not make the question more "
                                           "likely, “not in your documents” is said instead of an answer. About "
                                           "half a second",
                                           "回答之前，模型分别在读过段落后和不读段落时读这个问题；如果段落没有让这个"
                                           "问题变得更“意料之中”，就说明“文档中没有答案”，不生成回答。约半秒"),
    "set.generation.ask_other_language": ("Ask the other language's documents when the passages are about "
                                          "something else", "段落说的是别的内容时改问另一种语言的文档"),
    "set.generation.ask_other_language.tip": ("In a library of Chinese and English documents: when the passages in "
                                              "the question's language are about something else and a document in "
                                              "the other language is near the question, the question is translated "
                                              "and answered from those documents, in their language. A few seconds",
                                              "文库中有中英文文档时：如果问题所用语言的段落说的是别的内容，而另一种"
                                              "语言有接近这个问题的文档，就把问题译成那种语言，用那些文档回答（回答"
                                              "也用那种语言）。需要几秒钟"),
    "set.generation.read_ahead": ("Read the question's passages while it is typed", "输入问题时先读段落"),
    "set.generation.read_ahead.tip": ("At each pause in typing, the model reads the passages the answer would read, "
                                      "so that after Enter the first words come seconds sooner; the answer is the "
                                      "same. Uses the processor while you type",
                                      "输入停顿时，模型先读回答要用的段落，按回车后回答的第一个字能早几秒出现；"
                                      "回答不变。输入时会占用处理器"),
    "set.generation.judge_passages": ("Ask the model whether the passages hold the answer",
                                      "先让模型判断段落中是否有答案"),
    "set.generation.judge_passages.tip": ("The model says whether the answer's passages hold the answer; when they "
                                          "do not, the answer is marked (and called “not in your documents” when no "
                                          "passage holds what it says either), or “not in your documents” is said "
                                          "instead of it. Under a second: the answer reads the same prompt",
                                          "让模型判断回答所读的段落中是否有答案；没有时在回答旁提示（若段落也不包含回答"
                                          "所说的内容，则说明“文档中没有答案”），或改为说明“文档中没有答案”。"
                                          "不到一秒：回答读的是同一个提示"),
    "set.generation.check_citations": ("Check the model's citations", "检查模型的引用"),
    "set.generation.check_citations.tip": ("A [n] whose passage does not hold the sentence it ends is removed, "
                                           "and a repeated marker is written once",
                                           "若 [n] 所指段落不包含该句内容则移除，重复的标注只保留一个"),
    "set.generation.match_citations": ("Match uncited sentences to sources", "为未标注的句子匹配来源"),
    "set.generation.match_citations.tip": ("A sentence the model wrote without [n] gets the passage that holds most "
                                           "of its words, shown as matched (dotted), not as the model's citation",
                                           "模型未标注 [n] 的句子，会匹配到包含其大部分词语的段落，"
                                           "并以虚线标出为“匹配所得”，而非模型自己的引用"),
    "set.generation.rewrite_timeout_s": ("Follow-up rewrite time limit (s)", "追问改写时限（秒）"),
    "set.generation.rewrite_timeout_s.tip": ("A follow-up whose rewrite takes longer is asked in your own words",
                                             "改写超过此时限的追问将按原话提问"),
    "set.ui.language": ("Language", "语言"),
    "set.ui.language.tip": ("Language of the interface", "界面语言"),
    "choice.auto": ("calibrate from the library", "根据文档库自动校准"),
    "choice.off": ("off", "关闭"),
    "choice.warn": ("answer and warn", "回答并提示"),
    "choice.abstain": ("say “not in your documents”", "说明“文档中没有答案”"),
    "choice.llama_cpp": ("in this app (llama.cpp)", "在本应用中（llama.cpp）"),
    "choice.openai": ("OpenAI-compatible server", "兼容 OpenAI 的服务器"),
    "choice.doc": ("whole documents", "整篇文档"),
    "choice.chunk": ("passages", "段落"),
    "choice.hybrid": ("hybrid (s_sim and s_c)", "混合（s_sim 与 s_c）"),
    "choice.causal": ("causal (s_c only)", "因果（仅 s_c）"),
    "choice.gated": ("as the calibration gate decides", "由校准门控决定"),
    "choice.baseline": ("baseline order", "基线顺序"),
    "choice.improved": ("improved", "改进"),
    "choice.plain": ("as in the paper", "与论文相同"),
    "choice.demote": ("demote", "排到后面"),
    "choice.fallback": ("fall back to s_sim", "回退到 s_sim"),
    "choice.paper": ("as in the paper (Eq. 4–5)", "与论文相同（式 4–5）"),
    "choice.centred": ("centred on the library's mean", "以文库均值为中心"),
    "choice.idf": ("IDF-weighted B centroid", "B 质心按 IDF 加权"),
    "choice.contrast": ("contrast with the library's mean s_c", "与文库平均 s_c 对比"),
    "choice.centred_idf": ("centred and IDF-weighted", "中心化并按 IDF 加权"),
    "choice.context": ("B's sentences without A's words", "B 所在的句子（去掉 A 的词）"),
    # ------------------------------------------------------------------ calibration wizard
    "cal.title": ("Calibration wizard", "校准向导"),
    "cal.step1": ("Step 1 of 3 · Probe questions", "第 1 步，共 3 步 · 探测问题"),
    "cal.step2": ("Step 2 of 3 · Mark the documents that answer each question",
                  "第 2 步，共 3 步 · 标出能回答每个问题的文档"),
    "cal.step3": ("Step 3 of 3 · Result and decision", "第 3 步，共 3 步 · 结果与决定"),
    "cal.intro": ("Does re-ranking help in this library? The wizard asks a few questions about your own documents, "
                  "you mark which documents answer them, and it measures whether the causal or the hybrid "
                  "re-ranking puts those documents higher than the baseline (paper 000 §4.6).",
                  "重排序对本文档库有帮助吗？向导会就你自己的文档提出几个问题，由你标出能回答它们的文档，"
                  "然后衡量因果重排序或混合重排序是否比基线把这些文档排得更靠前（论文 000 §4.6）。"),
    "cal.stored": ("Stored for this library now: {decision}, from {n} questions (reliability {pct}).",
                   "本文档库当前保存的决定：{decision}，基于 {n} 个问题（可靠度 {pct}）。"),
    "cal.stored_self": ("Stored for this library now: {decision}, from its own check ({n} probes from its documents, "
                        "reliability {pct}); a decision from your questions replaces it.",
                        "本文档库当前保存的决定：{decision}，来自文档库自身的检查（{n} 个取自文档本身的探针问题，"
                        "可靠度 {pct}）；根据你的问题作出的决定会取代它。"),
    "cal.stored_none": ("No decision is stored for this library yet.", "本文档库还没有保存任何决定。"),
    "cal.d.causal": ("causal rerank", "因果重排序"),
    "cal.d.hybrid": ("hybrid rerank", "混合重排序"),
    "cal.d.neither": ("baseline order", "基线顺序"),
    "cal.generate": ("Let the local model write questions from passages sampled from the library",
                     "由本地模型根据从文档库中抽取的段落生成问题"),
    "cal.n_probes": ("Number of questions:", "问题数量："),
    "cal.type": ("Type the questions myself (one per line)", "自己输入问题（每行一个）"),
    "cal.type_placeholder": ("One question per line, for example:\nWhy do people fail the Wason selection task?\n"
                             "出差住宿费标准是多少？",
                             "每行一个问题，例如：\n出差住宿费标准是多少？\n"
                             "Why do people fail the Wason selection task?"),
    "cal.back": ("< Back", "< 上一步"),
    "cal.next": ("Next >", "下一步 >"),
    "cal.stop": ("Stop", "停止"),
    "cal.close": ("Close", "关闭"),
    "cal.apply": ("Apply the decision", "应用该决定"),
    "cal.apply_tip": ("Store the decision in this library and let the causal column follow it "
                      "(Settings → Retrieval → “as the calibration gate decides”)",
                      "将该决定保存到本文档库，并让因果列按它排序（设置 → 检索 → “由校准门控决定”）"),
    "cal.no_questions": ("Type at least one question, one per line.", "请至少输入一个问题，每行一个。"),
    "cal.empty_library": ("This library has no documents yet: add a folder first, then calibrate.",
                          "本文档库还没有文档：请先添加文件夹，再进行校准。"),
    "cal.busy": ("Files are being added; wait until that ends (or cancel it) before calibrating.",
                 "正在添加文件；请等待完成（或取消）后再校准。"),
    "cal.writing": ("Writing question {cur} of {total}…", "正在生成第 {cur} 个问题，共 {total} 个…"),
    "cal.ranking": ("Ranking question {cur} of {total}…", "正在为第 {cur} 个问题排序，共 {total} 个…"),
    "cal.scoring": ("Computing Δ and the bootstrap reliability…", "正在计算 Δ 和自助法可靠度…"),
    "cal.storing": ("Storing the decision…", "正在保存该决定…"),
    "cal.stopped": ("Stopped; nothing was changed.", "已停止；没有做任何更改。"),
    "cal.no_probes": ("The model wrote no usable question; try again, or type the questions.",
                      "模型没有生成可用的问题；请重试，或自己输入问题。"),
    "cal.failed": ("That did not work: {msg}", "操作未完成：{msg}"),
    "cal.label_intro": ("Click a question on the left, then tick every document that answers it. Questions the "
                        "model wrote come with the document of their passage ticked; change it if it is wrong. "
                        "Questions with nothing ticked are left out.",
                        "在左侧点击一个问题，然后勾选所有能回答它的文档。模型生成的问题已勾选其来源段落所在的文档；"
                        "如有错误请更改。没有勾选任何文档的问题将不参与计算。"),
    "cal.h.questions": ("Questions", "问题"),
    "cal.probe_item": ("{q}  ({n} ticked)", "{q}（已勾选 {n} 个）"),
    "cal.generated_tip": ("Written by the local model from a passage of the pre-ticked document",
                          "由本地模型根据预先勾选的文档中的一段写出"),
    "cal.typed_tip": ("Typed by you", "由你输入"),
    "cal.candidates": ("Documents found for: {q}", "为该问题找到的文档：{q}"),
    "cal.ranks": ("baseline {b} · causal {c} · hybrid {h}", "基线 {b} · 因果 {c} · 混合 {h}"),
    "cal.rank": ("#{n}", "第 {n} 名"),
    "cal.rank_none": ("not in top 10", "不在前 10"),
    "cal.no_candidates": ("No document was found for this question.", "没有为这个问题找到文档。"),
    "cal.labelled": ("{n} of {total} questions have a document ticked.", "{total} 个问题中有 {n} 个已勾选文档。"),
    "cal.need_label": ("Tick at least one document that answers a question.", "请至少为一个问题勾选能回答它的文档。"),
    "cal.h.method": ("Method", "方法"),
    "cal.h.mrr": ("Mean MRR@10", "平均 MRR@10"),
    "cal.h.delta": ("Δ against the baseline", "相对基线的 Δ"),
    "cal.h.reliability": ("Bootstrap reliability", "自助法可靠度"),
    "cal.h.question": ("Question", "问题"),
    "cal.m.baseline": ("Baseline", "基线"),
    "cal.m.causal": ("Causal rerank (s_c)", "因果重排序（s_c）"),
    "cal.m.hybrid": ("Hybrid (s_sim and s_c)", "混合（s_sim 与 s_c）"),
    "cal.summary": ("{n} questions scored. MRR@10 is 1 when a ticked document is ranked first, ½ when second, … "
                    "and 0 when none is in the top 10; Δ is a method's mean minus the baseline's.",
                    "共计算了 {n} 个问题。MRR@10：勾选的文档排第 1 名得 1，排第 2 名得 ½，……前 10 名中没有则得 0；"
                    "Δ 是某方法的平均值减去基线的平均值。"),
    "cal.unlabelled": ("{n} questions with nothing ticked were left out.", "有 {n} 个未勾选任何文档的问题未参与计算。"),
    "cal.decision.causal": ("Decision: use the causal rerank. On your questions it ranked the right documents "
                            "higher than the baseline did (Δ = {delta}), and gained the most.",
                            "决定：使用因果重排序。在你的问题上，它比基线把正确的文档排得更靠前（Δ = {delta}），"
                            "且提升最大。"),
    "cal.decision.hybrid": ("Decision: use the hybrid rerank. On your questions it ranked the right documents "
                            "higher than the baseline did (Δ = {delta}), and gained the most.",
                            "决定：使用混合重排序。在你的问题上，它比基线把正确的文档排得更靠前（Δ = {delta}），"
                            "且提升最大。"),
    "cal.decision.neither": ("Decision: keep the baseline order. Neither re-ranking ranked the right documents "
                             "higher than the baseline on your questions, so the causal column will show the "
                             "baseline order.",
                             "决定：保持基线顺序。在你的问题上，两种重排序都没有比基线把正确的文档排得更靠前，"
                             "因此因果列将显示基线顺序。"),
    "cal.reliability": ("Reliability {pct}: in {draws} bootstrap resamples of your {n} questions the same decision "
                        "came out {pct} of the time — {level}.",
                        "可靠度 {pct}：对你的 {n} 个问题做 {draws} 次自助重抽样，"
                        "有 {pct} 的结果得出相同的决定——{level}。"),
    "cal.level.high": ("a reliable decision", "这是可靠的决定"),
    "cal.level.medium": ("fairly reliable; more questions would make it firmer",
                         "比较可靠；更多问题会让它更稳固"),
    "cal.level.few": ("too few questions to rely on: mark at least {min}",
                      "问题太少，还不能依赖：请至少标注 {min} 个问题"),
    "cal.level.low": ("uncertain; mark more questions before relying on it", "不确定；请先标注更多问题再依赖它"),
    "cal.applied": ("The decision is stored in this library and the causal column now follows it.",
                    "该决定已保存到本文档库，因果列现在按它排序。"),
    # ------------------------------------------------------------------ errors
    "err.missing_dependency": ("A program part is missing: {detail}", "缺少程序组件：{detail}"),
    "err.model_unavailable": ("A model is not available: {detail}", "模型不可用：{detail}"),
    "err.settings": ("A setting is not valid: {detail}", "设置无效：{detail}"),
    "err.embedder_mismatch": ("This library was built with another embedder. {detail}",
                              "该文档库是用另一个向量模型建立的。{detail}"),
    "err.catalog": ("The library cannot be used: {detail}", "无法使用该文档库：{detail}"),
    "err.prompt_too_long": ("The question is too long for the model: {detail}", "问题过长，模型无法处理：{detail}"),
    "err.unreadable": ("A document cannot be read: {detail}", "无法读取文档：{detail}"),
    "err.memory": ("The computer ran out of memory.", "内存不足。"),
    "err.connection": ("The model server could not be reached: {detail}", "无法连接到模型服务器：{detail}"),
    "err.permission": ("No permission to use {path}: {detail}", "没有权限访问 {path}：{detail}"),
    "err.not_found": ("{path} was not found: {detail}", "找不到 {path}：{detail}"),
    "err.os": ("A file operation failed: {detail}", "文件操作失败：{detail}"),
    "err.value": ("That did not work: {detail}", "操作未完成：{detail}"),
    "err.unexpected": ("Something unexpected went wrong ({kind}: {detail}).", "发生了意外错误（{kind}：{detail}）。"),
    "err.hint.install": ("Install the package as shown, then restart the app.",
                         "请按提示安装该组件，然后重新启动应用。"),
    "err.hint.models": ("Open Settings → Models and choose an available model, or run “rag-desktop models”.",
                        "请打开 设置 → 模型 选择可用的模型，或运行“rag-desktop models”。"),
    "err.hint.settings": ("Open Settings and correct the value (or choose “Papers' defaults”).",
                          "请打开设置并更正该值（或选择“恢复论文默认值”）。"),
    "err.hint.embedder_mismatch": ("Switch back to that embedder in Settings, or re-embed the library.",
                                   "请在设置中换回原来的向量模型，或重新向量化该文档库。"),
    "err.hint.catalog": ("Choose another library folder, or check that this one is writable.",
                         "请选择其他文档库文件夹，或检查该文件夹是否可写。"),
    "err.hint.prompt_too_long": ("Shorten the question, or increase the context length in Settings → Models.",
                                 "请缩短问题，或在 设置 → 模型 中增大上下文长度。"),
    "err.hint.unreadable": ("Check the file opens in its usual program; the other files are not affected.",
                            "请检查该文件能否用默认程序打开；其他文件不受影响。"),
    "err.hint.memory": ("Close other programs, or choose a smaller model in Settings.",
                        "请关闭其他程序，或在设置中选择更小的模型。"),
    "err.hint.connection": ("Start the server, check its address in Settings → Models, or switch to “in this app”.",
                            "请启动服务器、在 设置 → 模型 中检查地址，或改为“在本应用中”运行。"),
    "err.hint.permission": ("Check the file's permissions, or choose another location.",
                            "请检查文件权限，或选择其他位置。"),
    "err.hint.not_found": ("The file may have been moved or deleted; use Re-scan to update the library.",
                           "该文件可能已被移动或删除；请“重新扫描”以更新文档库。"),
    "err.hint.os": ("Check the disk has space and the folder is accessible, then try again.",
                    "请检查磁盘空间和文件夹访问权限，然后重试。"),
    "err.hint.value": ("Check what you entered and try again.", "请检查输入后重试。"),
    "err.hint.unexpected": ("Try again; if it happens again, the details are in the log: {log}",
                            "请重试；如果再次出现，详细信息见日志：{log}"),
    # Models page
    "menu.models": ("Models…", "模型…"),
    "models.title": ("Models", "模型"),
    "models.intro": ("The models in use and the recommended ones. Nothing is downloaded unless you press "
                     "Download: the app works offline. Downloads go to {folder}.",
                     "正在使用的模型和推荐的模型。除非您点击“下载”，否则不会下载任何内容：本应用离线工作。"
                     "下载保存到 {folder}。"),
    "models.col.role": ("Role", "用途"),
    "models.col.name": ("Model", "模型"),
    "models.col.in_use": ("In use", "使用中"),
    "models.col.on_disk": ("On disk", "已在本机"),
    "models.col.size": ("Size", "大小"),
    "models.col.memory": ("Memory need", "所需内存"),
    "models.col.speed": ("Speed on this machine", "本机实测速度"),
    "models.col.action": ("", ""),
    "models.role.generator": ("Answers and translation", "回答与翻译"),
    "models.role.embedder": ("Embeddings", "向量嵌入"),
    "models.role.reranker": ("Reranker (cross-encoder column)", "重排序（交叉编码器列）"),
    "models.kind.embedded": ("shipped with the app", "随应用提供"),
    "models.kind.download": ("recommended, download", "推荐，需下载"),
    "models.kind.own": ("your file", "您的文件"),
    "models.substitute": ("None — the column uses the embedding-cosine substitute",
                          "无——该列使用嵌入余弦替代评分"),
    "models.yes": ("yes", "是"),
    "models.no": ("no", "否"),
    "models.size_download": ("{size} to download", "需下载 {size}"),
    "models.memory": ("≈ {size}", "约 {size}"),
    "models.speed_none": ("not measured yet", "尚未测量"),
    "models.speed": ("prompt {prompt} tok/s, answer {answer} tok/s", "读入 {prompt} 词元/秒，生成 {answer} 词元/秒"),
    "models.in_use": ("In use", "使用中"),
    "models.use": ("Use", "使用"),
    "models.download": ("Download", "下载"),
    "models.missing": ("Not found", "未找到"),
    "models.cancel": ("Cancel", "取消"),
    "models.close": ("Close", "关闭"),
    "models.own_gguf": ("Use a GGUF file I already have…", "使用我已有的 GGUF 文件…"),
    "models.own_gguf_title": ("Choose a GGUF model file", "选择 GGUF 模型文件"),
    "models.gguf_filter": ("GGUF models (*.gguf);;All files (*)", "GGUF 模型 (*.gguf);;所有文件 (*)"),
    "models.switched": ("{name} is now in use. A question already running finishes with the previous model; "
                        "the next question uses this one — no restart needed.",
                        "现在使用 {name}。正在进行的提问会用原来的模型完成；下一个提问将使用新模型——无需重启。"),
    "models.connecting": ("{name}: asking the server for the file list…", "{name}：正在向服务器获取文件列表…"),
    "models.progress": ("{name}: {done} of {total}", "{name}：{done} / {total}"),
    "models.progress_eta": ("{name}: {done} of {total}, {eta}", "{name}：{done} / {total}，{eta}"),
    "models.downloaded": ("Downloaded and checked (sha256): {path}. Press Use to switch to it.",
                          "已下载并校验（sha256）：{path}。点击“使用”即可切换。"),
    "models.already_there": ("Already on disk and checked (sha256): {path}.", "已在本机并通过校验（sha256）：{path}。"),
    "models.cancelling": ("Stopping the download…", "正在停止下载…"),
    "models.cancelled": ("Download cancelled. What arrived is kept; Download again resumes from there.",
                         "下载已取消。已下载的部分会保留；再次点击“下载”将从中断处继续。"),
    "models.kept": ("{size} already downloaded are kept; Download again resumes from there.",
                    "已下载的 {size} 会保留；再次点击“下载”将从中断处继续。"),
    "models.err.offline": ("No network: the download server cannot be reached. Connect to a network (or set "
                           "HF_ENDPOINT to a reachable mirror) and press Download again. {kept}\n{detail}",
                           "没有网络：无法连接下载服务器。请连接网络（或将 HF_ENDPOINT 设为可访问的镜像）"
                           "后再次点击“下载”。{kept}\n{detail}"),
    "models.err.interrupted": ("The download was interrupted several times and stopped. {kept}\n{detail}",
                               "下载多次中断后已停止。{kept}\n{detail}"),
    "models.err.checksum": ("Checksum mismatch: a downloaded file is not the published one, so it was deleted and "
                            "nothing was installed. Press Download to try again (a proxy or mirror may be altering "
                            "it). {kept}\n{detail}",
                            "校验和不一致：下载的文件与发布的文件不同，已删除，未安装任何内容。请再次点击“下载”重试"
                            "（代理或镜像可能改动了文件）。{kept}\n{detail}"),
    "models.err.hub": ("The download server refused the request. {kept}\n{detail}",
                       "下载服务器拒绝了请求。{kept}\n{detail}"),
    "models.err.not_gguf": ("{path} cannot be used as the answer model: {detail}",
                            "{path} 无法用作回答模型：{detail}"),
}

_state = threading.local()
_default = "en"


def language() -> str:
    return str(getattr(_state, "lang", _default))


def set_language(lang: str) -> None:
    """Switch the UI language (process-wide default and this thread)."""
    global _default
    if lang not in LANGUAGES:
        raise ValueError(f"ui.language: {lang!r} is not one of {LANGUAGES}")
    _default = lang
    _state.lang = lang


@contextlib.contextmanager
def using(lang: str) -> Iterator[None]:
    """Temporarily use ``lang`` on this thread (the report is written in its own language)."""
    if lang not in LANGUAGES:
        raise ValueError(f"language {lang!r} is not one of {LANGUAGES}")
    old = getattr(_state, "lang", None)
    _state.lang = lang
    try:
        yield
    finally:
        if old is None:
            del _state.lang
        else:
            _state.lang = old


def has_tr(key: str) -> bool:
    return key in TABLE


def tr(key: str, **values: Any) -> str:
    """The string for ``key`` in the current language, with ``{name}`` placeholders filled."""
    entry = TABLE.get(key)
    if entry is None:
        log.warning("i18n: missing key %r", key)
        return key
    text = entry[LANGUAGES.index(language())]
    if not values:
        return text
    try:
        return text.format(**values)
    except (KeyError, IndexError, ValueError):
        log.warning("i18n: key %r does not accept %s", key, sorted(values))
        return text
