"""What a page check found and what counts as a problem (no browser here): :class:`PageReport` (one page),
:class:`SliderResult` (moving a control), :class:`Overflow` (a table or output wider than the text column),
their verdicts (``PageReport.problems``) and :func:`format_table`. :mod:`sec_lib.site.pagecheck` fills them in
through :mod:`sec_lib.site.pagebrowser`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

#: Viewport widths (px) at which the layout is checked: a laptop, a narrow window, a phone.
WIDTHS = (1400, 800, 420)
#: Below this width a wide table or output may scroll inside its own box.
PHONE_WIDTH = 600


@dataclass
class SliderResult:
    """What happened when the first slider (or dropdown) of the page was moved."""
    control: str                 # "slider" or "dropdown", or "" when the page has neither
    steps: int
    value_before: str = ""
    value_after: str = ""
    images_before: list[str] = field(default_factory=list)   # content signatures of the shown images
    images_after: list[str] = field(default_factory=list)
    srcs_before: list[str] = field(default_factory=list)
    srcs_after: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def moved(self) -> bool:
        return bool(self.control) and not self.error and self.value_before != self.value_after

    @property
    def image_changed(self) -> bool:
        return (self.moved and bool(self.images_after) and self.images_before != self.images_after
                and all(self.images_after))


#: The width at which a page's answer is measured, and how far down it may start (px): the first screen of a
#: reader at 1,400 x 1,000.
ANSWER_WIDTH, ANSWER_WITHIN = 1400, 1000


@dataclass
class Overflow:
    """A table or cell output wider than the text column, or a formula (display or inline) wider than its
    box or the column, at one viewport width."""
    width: int                   # viewport width, px
    what: str                    # "table", "output", "formula" or "formula (inline)", with the start of its text
    content_px: float            # the element's full width (including what scrolls)
    column_px: float             # the text column's width
    in_scroll_box: bool          # it scrolls inside its own box that fits the column

    @property
    def allowed(self) -> bool:
        """Only inside its own scroll box, and for a table or output only at a phone width (a long formula
        may scroll at any width: it cannot wrap)."""
        return self.in_scroll_box and (self.width < PHONE_WIDTH or self.what.startswith("formula"))

    def __str__(self) -> str:
        box = ", scrolls in its own box" if self.in_scroll_box else ""
        return f"{self.what} is {self.content_px:.0f} px wide in a {self.column_px:.0f} px column at {self.width} px{box}"


@dataclass
class PageReport:
    """Everything :func:`check_page` saw on one page. ``ok`` is true when ``problems`` is empty."""
    page: str
    url: str
    title: str = ""
    requests: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    widget_views: int = 0          # widget views the HTML declares
    widgets_rendered: int = 0      # of those, rendered by the widget manager
    widget_elements: int = 0       # elements with class jupyter-widgets / widget-* inside rendered views
    has_widget_state: bool = False
    formulas: int = 0              # Sphinx math elements (span/div.math) on the page
    formulas_typeset: int = 0      # of those, typeset by MathJax (hold an mjx-container)
    math_errors: int = 0           # of those, typeset as a MathJax error (unknown macro, missing extension)
    images: int = 0
    broken_images: list[str] = field(default_factory=list)
    uncaptioned_figures: list[str] = field(default_factory=list)   # figures a cell drew without a caption
    expect_widgets: int | None = None
    slider: SliderResult | None = None
    screenshot: str | None = None
    widths: list[int] = field(default_factory=list)          # viewport widths whose layout was checked
    overflows: list[Overflow] = field(default_factory=list)
    page_scrolls: list[int] = field(default_factory=list)    # widths at which the page scrolls sideways
    load_ms: float | None = None       # navigation start -> load event
    typeset_ms: float | None = None    # navigation start -> MathJax done (and widgets rendered)
    max_load_ms: float | None = None   # when set, a slower load is a problem
    screenshots: list[str] = field(default_factory=list)     # one per checked width
    decides_claims: bool = False       # the page shows a claims box (it decides claims of the scorecard)
    answer_y: float | None = None      # where its marked answer (.page-answer) starts, px from the top at ANSWER_WIDTH
    answer_marked: bool = False        # that answer carries a verdict (data-verdict) and an interval ([lo, hi])
    answer_within: float | None = ANSWER_WITHIN   # a page that decides claims must start its answer above this
    jargon_before_answer: list[str] = field(default_factory=list)   # claim ids, tier and family names above it
    figure_first_screen: bool = False  # the answer asks for its figure on the first screen (data-figure="first-screen")
    figure_y: float | None = None      # where the first image after the answer starts, px, at ANSWER_WIDTH
    figure_h: float | None = None      # its height, px

    @property
    def problems(self) -> list[str]:
        out = []
        if self.external_requests:
            out.append(f"{len(self.external_requests)} request(s) leave the machine: "
                       + ", ".join(self.external_requests[:3]))
        if self.failed_requests:
            out.append(f"{len(self.failed_requests)} failed request(s): " + ", ".join(self.failed_requests[:3]))
        if self.console_errors:
            out.append(f"{len(self.console_errors)} console error(s): " + " | ".join(self.console_errors[:3]))
        if self.page_errors:
            out.append(f"{len(self.page_errors)} page error(s): " + " | ".join(self.page_errors[:3]))
        if self.widgets_rendered < self.widget_views:
            out.append(f"only {self.widgets_rendered} of {self.widget_views} widget view(s) rendered")
        if self.expect_widgets is not None and self.widgets_rendered < self.expect_widgets:
            out.append(f"expected at least {self.expect_widgets} rendered widget view(s), "
                       f"found {self.widgets_rendered}")
        if self.formulas_typeset < self.formulas:
            out.append(f"only {self.formulas_typeset} of {self.formulas} formula(s) typeset by MathJax")
        if self.math_errors:
            out.append(f"{self.math_errors} formula(s) typeset as a MathJax error")
        if self.broken_images:
            out.append(f"{len(self.broken_images)} image(s) did not load: " + ", ".join(self.broken_images[:3]))
        if self.uncaptioned_figures:
            out.append(f"{len(self.uncaptioned_figures)} figure(s) without a caption: "
                       + ", ".join(self.uncaptioned_figures[:3]))
        bad = [o for o in self.overflows if not o.allowed]
        if bad:
            out.append(f"{len(bad)} table(s)/output(s)/formula(s) wider than the text column (a formula: than "
                       f"its box, without scrolling): " + "; ".join(str(o) for o in bad[:3]))
        if self.page_scrolls:
            out.append(f"the page scrolls sideways at {self.page_scrolls} px")
        if self.max_load_ms is not None and self.load_ms is not None and self.load_ms > self.max_load_ms:
            out.append(f"the page took {self.load_ms:.0f} ms to load (limit {self.max_load_ms:.0f} ms)")
        if self.decides_claims and self.answer_within is not None:
            if self.answer_y is None:
                out.append("no marked answer (.page-answer) on a page that decides claims")
            elif self.answer_y > self.answer_within:
                out.append(f"the answer starts {self.answer_y:.0f} px down at {ANSWER_WIDTH} px wide "
                           f"(limit {self.answer_within:.0f} px)")
            elif not self.answer_marked:
                out.append("the marked answer lacks its verdict (data-verdict) or its interval ([lo, hi])")
        if self.figure_first_screen:
            if self.figure_y is None:
                out.append("its answer asks for a figure on the first screen, and no image follows it")
            elif self.figure_y + self.figure_h / 2 > ANSWER_WITHIN:
                out.append(f"less than half of the figure after its answer is on the first screen (it spans "
                           f"{self.figure_y:.0f}-{self.figure_y + self.figure_h:.0f} px at {ANSWER_WIDTH} px wide; "
                           f"the screen ends at {ANSWER_WITHIN} px)")
        if self.jargon_before_answer:
            out.append("before its answer the page uses " + ", ".join(self.jargon_before_answer[:6])
                       + " (claim ids, tier and family names belong after it, or in the glossary)")
        if self.slider is not None:
            if not self.slider.control:
                out.append("no slider or dropdown to move" + (f" ({self.slider.error})" if self.slider.error else ""))
            elif not self.slider.moved:
                out.append(f"the {self.slider.control} did not move"
                           + (f" ({self.slider.error})" if self.slider.error else ""))
            elif not self.slider.image_changed:
                out.append(f"moving the {self.slider.control} did not change the shown image")
        return out

    @property
    def ok(self) -> bool:
        return not self.problems


def format_table(reports: Sequence[PageReport]) -> str:
    """A plain-text summary: one line per page, then the problems."""
    head = (f"{'page':<48} {'ok':<4} {'req':>4} {'ext':>4} {'err':>4} {'widgets':>9} {'imgs':>6} {'slider':<10} "
            f"{'wide':>4} {'load ms':>7} {'math ms':>7} {'answer':>6} {'figure':>6}")
    lines = [head, "-" * len(head)]
    for r in reports:
        errs = len(r.console_errors) + len(r.page_errors) + len(r.failed_requests)
        sl = "-" if r.slider is None else ("changed" if r.slider.image_changed else "NO CHANGE")
        imgs = f"{r.images - len(r.broken_images)}/{r.images}"
        lines.append(f"{r.page[:48]:<48} {'yes' if r.ok else 'NO':<4} {len(r.requests):>4} "
                     f"{len(r.external_requests):>4} {errs:>4} {f'{r.widgets_rendered}/{r.widget_views}':>9} "
                     f"{imgs:>6} {sl:<10} {sum(not o.allowed for o in r.overflows):>4} "
                     f"{_ms(r.load_ms):>7} {_ms(r.typeset_ms):>7} {_ms(r.answer_y):>6} {_ms(r.figure_y):>6}")
    bad = [r for r in reports if not r.ok]
    loads = [r for r in reports if r.load_ms is not None]
    if loads:
        slow = max(loads, key=lambda r: r.load_ms)
        lines.append("")
        lines.append(f"load time from file:// (navigation start to the load event): slowest {slow.load_ms:.0f} ms "
                     f"({slow.page}), median {sorted(r.load_ms for r in loads)[len(loads) // 2]:.0f} ms; "
                     f"{sum(r.load_ms < 1000 for r in loads)} of {len(loads)} pages under 1 s")
    lines.append("")
    lines.append(f"pages ok: {len(reports) - len(bad)} of {len(reports)}")
    for r in bad:
        for prob in r.problems:
            lines.append(f"  {r.page}: {prob}")
    return "\n".join(lines)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"
