// PLACEHOLDER — the model helper replaces this file.
public import StrataPredicate
