"""Words and sentence pieces shared by every area (values that are themselves messages)."""

TEMPLATES = {
    "word.rising": ("rising", "上升"),
    "word.falling": ("falling", "下降"),
    "word.flat": ("flat", "持平"),
    "word.forward": ("forward", "前向"),
    "word.backward": ("backward", "反向"),
    "word.nonfinite": ("non-finite", "非有限值"),
}
