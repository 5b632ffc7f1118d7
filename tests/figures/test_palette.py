"""One palette: a colour means one thing across the book's figures."""
import itertools

import matplotlib.colors as mcolors

from sec_lib.figures import palette


def hexes(colors):
    return {mcolors.to_hex(c) for c in colors}


def test_no_colour_is_shared_between_variants_losses_optimizers_and_classes():
    groups = {"variant": hexes(palette.VARIANT_COLORS.values()), "loss": hexes(palette.LOSS_COLORS.values()),
              "optimizer": hexes(palette.OPTIM_COLORS.values()), "class": hexes(palette.CLASS_COLORS)}
    for (a, ca), (b, cb) in itertools.combinations(groups.items(), 2):
        assert not ca & cb, f"{a} and {b} share {ca & cb}"


def test_nothing_but_sec_is_orange_red():
    """No loss, optimizer or class colour has a hue near SEC's vermilion (hue within 12° of it and saturated; the triplet loss's mustard is 14° away)."""
    h_sec = mcolors.rgb_to_hsv(mcolors.to_rgb(palette.VARIANT_COLORS["sec"]))[0]
    others = [*palette.LOSS_COLORS.values(), *palette.OPTIM_COLORS.values(), *palette.CLASS_COLORS]
    for c in others:
        h, s, v = mcolors.rgb_to_hsv(mcolors.to_rgb(c))
        near = min(abs(h - h_sec), 1 - abs(h - h_sec)) < 12 / 360
        assert not (near and s > 0.5 and v > 0.5), c
