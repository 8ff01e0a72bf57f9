#!/usr/bin/env python3
"""Writes examples/data/corpus.txt, gaaw-train's default corpus: short stories about
the people of a small harbour town, generated from a hand-written grammar by a
fixed-seed generator, so the text is ours, needs no download and is the same on
every run. Usage: python3 make_corpus.py > corpus.txt"""

import sys

# A 64-bit linear congruential generator (Knuth's MMIX constants): the same text on
# every Python version, unlike the random module's sequences.
state = 20240917


def rand(n):
    global state
    state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
    return (state >> 33) % n


def pick(items):
    return items[rand(len(items))]


PEOPLE = [("Mara", "she", "her"), ("Tomas", "he", "his"), ("Ilse", "she", "her"), ("Oskar", "he", "his"),
          ("Nadia", "she", "her"), ("Bram", "he", "his"), ("Lena", "she", "her"), ("Pieter", "he", "his"),
          ("Awa", "she", "her"), ("Moussa", "he", "his"), ("Fatou", "she", "her"), ("Jonas", "he", "his")]
TRADES = ["baker", "fisherman", "weaver", "smith", "teacher", "sailor", "carpenter", "gardener", "potter",
          "lighthouse keeper", "miller", "doctor"]
PLACES = ["the harbour", "the market", "the old mill", "the lighthouse", "the bakery", "the school",
          "the bridge over the river", "the hill above the town", "the square", "the boatyard", "the library",
          "the orchard"]
TIMES = ["At dawn", "In the morning", "At noon", "In the afternoon", "Towards evening", "Late at night",
         "On the first day of spring", "When the rain stopped", "After the storm", "On market day"]
WEATHER = ["the sky was grey and low", "a cold wind came in from the sea", "the sun was warm on the stones",
           "fog lay over the water", "the first snow was falling", "the air smelled of salt and bread",
           "the tide was out and the gulls were loud", "rain drummed on the roofs"]
THINGS = ["a basket of apples", "a loaf of bread", "a coil of rope", "a lantern", "a letter", "a net",
          "a wooden box", "a map of the coast", "a jar of honey", "a small brass key", "a bundle of wool",
          "a book of old songs"]
FEELINGS = ["glad", "tired", "worried", "curious", "proud", "quiet", "hopeful", "restless"]
SAYINGS = ["The sea gives and the sea takes.", "A slow boat still reaches the shore.",
           "Bread shared is bread doubled.", "Mend the net before the storm, not after.",
           "Every road in this town ends at the water.", "A lamp in the window brings the sailors home.",
           "Count the waves and you will never count the fish.", "An open door is the best lock."]
VERBS = ["walked to", "hurried to", "went down to", "climbed up to", "came back to", "waited at"]
ACTIONS = ["found {thing}", "carried {thing} home", "gave {thing} to {other}", "lost {thing}",
           "bought {thing}", "mended {thing}", "hid {thing} under the stairs", "showed {thing} to {other}"]


def sentence_story(i):
    name, he, his = pick(PEOPLE)
    other = pick([p for p in PEOPLE if p[0] != name])[0]
    trade = pick(TRADES)
    lines = []
    lines.append(f"{name} the {trade} {pick(VERBS)} {pick(PLACES)}.")
    lines.append(f"{pick(TIMES)}, {pick(WEATHER)}.")
    for _ in range(2 + rand(3)):
        act = pick(ACTIONS).format(thing=pick(THINGS), other=other)
        opening = pick([f"Then {he}", f"After a while {he}", f"{name}", f"Later {he}", f"So {he}"])
        lines.append(f"{opening} {act}.")
        if rand(3) == 0:
            lines.append(f"{he.capitalize()} felt {pick(FEELINGS)}, and {his} hands were cold.")
        if rand(4) == 0:
            lines.append(f'"{pick(SAYINGS)}" said {other}.')
    lines.append(f"In the evening {name} went home, and {pick(WEATHER)}.")
    return f"{i}. " + " ".join(lines)


def counting_rhyme():
    n = 2 + rand(8)
    thing = pick(["boats", "gulls", "lamps", "fish", "bells", "stars"])
    parts = [f"{k} {thing} in the harbour" if k > 1 else f"one of the {thing} in the harbour" for k in range(n, 0, -1)]
    return ", ".join(parts) + ", and then there were none."


def main():
    out = ["THE HARBOUR BOOK", "",
           "Stories of a small town by the sea, written by a machine from a grammar.", ""]
    size = sum(len(line) + 1 for line in out)
    i = 1
    while size < 200_000:
        if rand(6):
            para = sentence_story(i)
            i += 1
        else:
            para = counting_rhyme()
        out.append(para)
        out.append("")
        size += len(para) + 2
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
