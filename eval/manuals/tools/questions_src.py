# Source of questions.jsonl: (id, lang, document, question, answers, where).
# Split rule (fixed before anything was run): within each language, in this file's order,
# every third question (3rd, 6th, 9th, ...) is "heldout", the rest "tune".
ZH_TL = "zh_texlive_guide_2020.pdf"
ZH_IG = "zh_install_latex_guide.pdf"
ZH_FD = "zh_fduthesis_fudan_thesis_template.pdf"
ZH_NJ = "zh_njurepo_nju_report_template.pdf"
ZH_EX = "zh_exam_zh_exam_paper_template.pdf"
EN_IRS = "en_irs_instructions_form_1040nr_2007.pdf"
EN_DM = "en_copyright_office_dmca_summary_1998.pdf"
EN_IE = "en_paper_preemptive_information_extraction.pdf"
EN_LC = "en_paper_langchain_llm_apps_primer.pdf"
EN_FD = "en_fduthesis_fudan_thesis_template.pdf"

Q = [
 # ---------------- Chinese ----------------
 ("zh", ZH_TL, "TeX Live 的安装脚本叫什么名字？", ["install-tl"], "§1.3 TeX Live 的基本安装 (p. 4)"),
 ("zh", ZH_TL, "如果要报告 TeX Live 的 bug 或对发行版提建议，应该发邮件到哪个邮件列表？", ["tex-live@tug.org"], "§1.5 获得帮助 (p. 5)"),
 ("zh", ZH_TL, "Omega 是基于多少位的字符集？", ["16 位"], "§2.4 TeX 的扩展版本 (p. 7)"),
 ("zh", ZH_TL, "在 Unix 下 TEXMFHOME 个人宏文件目录的默认值是什么？", ["$HOME/texmf"], "§3.4.6 集成本地与个人宏文件 (p. 16)"),
 ("zh", ZH_TL, "Web2C 最早是由谁实现的？", ["Tomas Rokicki"], "§7 Web2C 用户指南 (p. 24)"),
 ("zh", ZH_TL, "kpsewhich 的 --dpi 选项（同义参数 -D）默认值是多少？", ["600"], "§7 Web2C 用户指南, kpsewhich 选项 (p. 28)"),
 ("zh", ZH_IG, "在 Windows 10 上用什么命令检查下载的 TeX Live iso 镜像的 MD5 值？", ["certutil -hashfile"], "§1.1 安装 TeX Live (p. 6)"),
 ("zh", ZH_IG, "想同时升级 tlmgr 本身和全部宏包，应该执行什么命令？", ["tlmgr update --self --all"], "§1.4 升级宏包 (p. 11)"),
 ("zh", ZH_IG, "宏包升级到一半停止了，用什么命令继续升级？", ["--reinstall-forcibly-removed"], "§1.4.2 升级到一半停止 (p. 11)"),
 ("zh", ZH_IG, "从哪个 Windows 10 版本开始，记事本默认使用 UTF-8 编码？", ["1903"], "§1.7 编译文档, 脚注 19 (p. 13)"),
 ("zh", ZH_IG, "Ubuntu 上装完 TeX Live 后无法使用 xelatex 命令，可能缺少哪个库？", ["libfontconfig"], "§2.7.1 无法使用xelatex 命令 (p. 22)"),
 ("zh", ZH_IG, "用 wget 下载 TeX Live 镜像时，指南举例用的是哪个国内镜像？", ["清华大学"], "§1.1.1 下载镜像一直不成功的处理办法 (p. 9)"),
 ("zh", ZH_FD, "fduthesis 模板中学校代码 school-id 的默认值是多少？", ["10246"], "§3.4.2 信息录入 (p. 11)"),
 ("zh", ZH_FD, "复旦大学的学号一共有几位？", ["11 位"], "§3.4.2 信息录入 (p. 11)"),
 ("zh", ZH_FD, "fduthesis 中论文标题默认在大约多少个汉字宽处强制断行？", ["20 个汉字"], "§3.4.2 信息录入 (p. 10)"),
 ("zh", ZH_FD, "fduthesis 的符号表 notation 环境默认的列格式是什么？", ["lp{7.5cm}", "7.5 cm"], "§3.5 正文编写 (p. 12)"),
 ("zh", ZH_FD, "在 fduthesis 里选择 bib-backend = bibtex 时，参考文献样式由哪个宏包提供？", ["gbt7714"], "§4 宏包依赖情况 (p. 15)"),
 ("zh", ZH_NJ, "NJUrepo 模板的 GitHub 仓库地址是什么？", ["zhengzangw/njurepo"], "§2.2 Github (p. 3)"),
 ("zh", ZH_NJ, "NJUrepo 手册给出的用 latexmk 调用 xelatex 生成文档的命令是什么？", ["latexmk -xelatex main"], "§2.5.1 latexmk (p. 4)"),
 ("zh", ZH_NJ, "从 GitHub 下载新版 NJUrepo 后，运行什么命令生成新的类文件？", ["make cls"], "§2.6 升级 (p. 4)"),
 ("zh", ZH_NJ, "按照写作指南，NJUrepo 报告中表格里的字号用哪个命令？", ["\\dawu"], "§3.3.1 字体命令 (p. 5)"),
 ("zh", ZH_NJ, "NJUrepo 的一级节标题用什么字体字号？", ["黑体四号", "14pt"], "§5.7.6 章节标题 (p. 20)"),
 ("zh", ZH_EX, "exam-zh 的 A4 和 A3 页面切换参考了哪个项目？", ["jnuexam"], "§1 介绍 (p. 3)"),
 ("zh", ZH_EX, "在 TeX Live 中用什么命令安装 exam-zh？", ["tlmgr install exam-zh"], "§2.1 标准安装 (p. 3)"),
 ("zh", ZH_EX, "exam-zh 上传 CTAN 后，大约要多久用户才能下载到？", ["一天"], "§2.2 手动安装 (p. 3)"),
 ("zh", ZH_EX, "exam-zh 中解答题的题干应该用哪个环境？", ["problem"], "§3.4.5 题干 (p. 10)"),
 ("zh", ZH_EX, "exam-zh 的 A3 版面中两页 A4 之间竖线的默认宽度是多少？", ["0.4pt"], "§3.5.4 页面设置 (p. 28)"),
 ("zh", ZH_EX, "exam-zh 密封线的水平偏移量默认是多少？", ["8mm"], "§3.5.5 密封线 (p. 29)"),
 ("zh", ZH_EX, "exam-zh 的密封线、草稿纸和评分框是什么时候开发的？", ["2022.6"], "§5 主要更新 (p. 56)"),
 # ---------------- English ----------------
 ("en", EN_IRS, "I had no wages subject to U.S. withholding in 2007. By what date must my Form 1040NR be filed?", ["June 16, 2008"], "When To File (p. 4)"),
 ("en", EN_IRS, "Which form do I file to get an extension of time to file Form 1040NR?", ["Form 4868"], "Extension of time to file (p. 4)"),
 ("en", EN_IRS, "What phone number do I call to reach the Social Security Administration about getting an SSN?", ["1-800-772-1213"], "Line Instructions — Identifying number (p. 8)"),
 ("en", EN_IRS, "How long after applying does the SSA usually take to send the social security card?", ["2 weeks"], "Line Instructions — Identifying number (p. 8)"),
 ("en", EN_IRS, "What is the general limit on elective salary deferrals under all plans for 2007?", ["$15,500"], "What's New for 2007 — Elective salary deferrals (p. 1)"),
 ("en", EN_DM, "What is the maximum criminal penalty for a first offense of wilfully violating the anti-circumvention or CMI rules for commercial gain?", ["$500,000", "five years"], "Title I — Remedies (p. 7)"),
 ("en", EN_DM, "After a subscriber files a counter notification, how soon must the service provider put the material back up?", ["10-14 business days"], "Title II — notice and takedown (p. 12)"),
 ("en", EN_DM, "Under the Vessel Hull Design Protection Act, how long does protection last once a design is registered?", ["ten years"], "Title V: Protection of Certain Original Designs (p. 17)"),
 ("en", EN_DM, "Up to what length of vessel does the hull design protection apply?", ["200 feet"], "Title V: Protection of Certain Original Designs (p. 17)"),
 ("en", EN_DM, "Which copy-protection technology must analog videocassette recorders conform to under section 1201(k)?", ["Macrovision"], "Title I — No mandate (p. 4)"),
 ("en", EN_DM, "Before the DMCA, for how long could a broadcaster keep an ephemeral recording?", ["six months"], "Title IV — Ephemeral Recordings for Broadcasters (p. 14)"),
 ("en", EN_IE, "What similarity threshold did Shinyama and Sekine use to group articles into a basic cluster?", ["0.65"], "§3.1 Web Crawling and Basic Clustering (p. 5)"),
 ("en", EN_IE, "How many newspapers did the preemptive IE experiment collect articles from?", ["twelve"], "§4 Experiment and Evaluation (p. 6)"),
 ("en", EN_IE, "How many source articles were used in the unrestricted relation discovery experiment?", ["28,009"], "§4 Experiment and Evaluation, Table 2 (p. 6)"),
 ("en", EN_IE, "Out of the evaluated tables, how many were judged consistent?", ["36"], "§4.2 Results (p. 6)"),
 ("en", EN_IE, "How many sentences of each article were used to get basic patterns?", ["ten sentences"], "§3.4 Basic Pattern Generation (p. 5)"),
 ("en", EN_IE, "What F-score does the HMM-based named entity tagger reach?", ["85%"], "§3.3 NE Tagging and Coreference Resolution (p. 5)"),
 ("en", EN_LC, "How many parameters did GPT-3 have according to the LangChain primer?", ["175 billion"], "§I Introduction (p. 3)"),
 ("en", EN_LC, "Which LangChain class chains steps that have multiple inputs but one output?", ["SequentialChain"], "§II.A.3 Chains (p. 4)"),
 ("en", EN_LC, "What is the most commonly used method for passing retrieved documents to the LLM?", ["stuff"], "§II.A.5 Question Answering from Documents (p. 5)"),
 ("en", EN_LC, "Which document-processing method loops over documents iteratively and cannot run its calls in parallel?", ["Refine", "refine"], "§II.A.5 Question Answering from Documents (p. 6)"),
 ("en", EN_LC, "What kind of agent decides the full sequence of actions upfront and then executes them?", ["plan-and-execute", "Plan and Execute"], "§II.A.6 Agents (p. 6)"),
 ("en", EN_FD, "What command installs the fduthesis template in TeX Live?", ["tlmgr install fduthesis"], "§2.1.1 Standard installation (p. 3)"),
 ("en", EN_FD, "What latexmk command compiles a fduthesis document with XeLaTeX?", ["latexmk -xelatex thesis"], "§3.2 Compilation (p. 5)"),
 ("en", EN_FD, "How many times do I need to compile a fduthesis document to get a correct table of contents?", ["at least twice"], "§3.2 Compilation (p. 5)"),
 ("en", EN_FD, "Which Roman (song) CJK font does fduthesis use with cjk-font = windows?", ["SimSun"], "§3.4.1 Style and format, Table 3 (p. 7)"),
]
