"""equivalent.txt and accepted.txt: survivors that are explained, keyed as a mutant is
(file, function, operator, original text, occurrence; tab-separated), then the reason.

  equivalent.txt  the mutant cannot change behaviour (it leaves the score's denominator)
  accepted.txt    a real gap left open, with the reason (it still counts as a survivor)

Lines starting with # and empty lines are comments.
"""
import os
import sys


def load(path):
    entries = {}
    if not os.path.exists(path):
        return entries
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) < 6 or not fields[5].strip():
                sys.exit("mutation: %s:%d: want file, function, operator, original, occurrence "
                         "and a reason, tab-separated" % (path, n))
            entries["\t".join(fields[:5])] = fields[5]
    return entries


class Lists:
    def __init__(self, mutation_dir):
        self.equivalent = load(os.path.join(mutation_dir, "equivalent.txt"))
        self.accepted = load(os.path.join(mutation_dir, "accepted.txt"))

    def verdict(self, key):
        if key in self.equivalent:
            return "equivalent"
        if key in self.accepted:
            return "accepted"
        return None
