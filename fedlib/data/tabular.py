"""adult (UCI Adult census income, 32,561 train / 16,281 test, >50K or not) as 123 binary features.

Two sources, two dataset names (`fedlib.data.load_dataset`):

* "adult": LIBSVM's `a9a` / `a9a.t` (the files NIID-Bench and TACO use): one sample per line,
  `<label> <index>:<value> ...` with label -1 or +1 (-> 0 / 1) and 1-based indices in [1, 123] in
  increasing order; every listed value is 1 (a9a's features are binary), absent ones are 0. `a9a.t`
  never uses index 123; the width is fixed at 123 for both files.
* "adult_uci": the raw UCI files `adult.data` / `adult.test` (15 comma-separated fields, `?` for a
  missing value, `adult.test` starts with a `|1x3 Cross validator` line and ends its labels with '.'),
  one-hot encoded by `adult_one_hot` into a9a's 123-column layout: the 14 attributes in UCI order,
  each a block of binary columns, a9a's block sizes
      age 5, workclass 8, fnlwgt 5, education 16, education-num 5, marital-status 7, occupation 14,
      relationship 6, race 5, sex 2, capital-gain 2, capital-loss 2, hours-per-week 5, native-country 41.
  A categorical attribute gets one column per UCI category (in adult.names' order); `?` leaves its
  block all zero (as a9a does). A continuous attribute is binned: age, fnlwgt, education-num and
  hours-per-week into 5 bins cut at the train split's quintiles (a value equal to a cut goes to the
  upper bin; tied quintiles leave a bin empty), capital-gain and capital-loss into "0" and "> 0".
  a9a's own cut points and column order inside a block are not published (Platt 1998 preprocessing),
  so these columns match a9a's block for block, not necessarily bit for bit.

Every reader checks what it reads and raises `DatasetFileError` naming the file, the line and the problem.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from fedlib.data.formats import DatasetFileError

A9A_FEATURES = 123
CONTINUOUS_BINS = {"age": 5, "fnlwgt": 5, "education-num": 5, "capital-gain": 2, "capital-loss": 2, "hours-per-week": 5}
CATEGORIES: dict[str, tuple[str, ...]] = {  # adult.names, in its order
    "workclass": ("Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
                  "Without-pay", "Never-worked"),
    "education": ("Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
                  "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"),
    "marital-status": ("Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
                       "Married-spouse-absent", "Married-AF-spouse"),
    "occupation": ("Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
                   "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
                   "Priv-house-serv", "Protective-serv", "Armed-Forces"),
    "relationship": ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "sex": ("Female", "Male"),
    "native-country": ("United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
                       "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
                       "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
                       "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia",
                       "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador",
                       "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands"),
}
ATTRIBUTES = ("age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
              "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country")
UCI_LABELS = {"<=50K": 0, ">50K": 1}
_A9A_LABELS = {"-1": 0, "+1": 1, "1": 1}
MAX_DIGITS = 18  # a continuous attribute is read as int64 (below 9.2e18); fnlwgt, the largest, has 7 digits


def is_decimal(text: str) -> bool:
    """`text` is a non-negative integer in the ASCII digits 0-9 (`str.isdigit` also takes other scripts' digits,
    "٣" for 3, and superscripts, which `int` refuses)."""
    return text.isascii() and text.isdigit()


def _lines(path: Path) -> list[tuple[int, str]]:
    """(1-based line number, stripped text) of the non-blank lines of a text file; an empty file is an error."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DatasetFileError(path, f"not UTF-8 text ({err})") from err
    lines = [(i, line.strip()) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise DatasetFileError(path, "empty file: no samples")
    return lines


def read_a9a(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """A LIBSVM a9a file as (uint8 N x 123 binary features, int64 labels in {0, 1})."""
    lines = _lines(Path(path))
    x = np.zeros((len(lines), A9A_FEATURES), dtype=np.uint8)
    y = np.empty(len(lines), dtype=np.int64)
    for row, (number, line) in enumerate(lines):
        label, *tokens = line.split()
        if label not in _A9A_LABELS:
            raise DatasetFileError(path, f"line {number}: label {label!r} is not -1 or +1 (a9a's two classes)")
        y[row] = _A9A_LABELS[label]
        previous = 0
        for token in tokens:
            index, sep, value = token.partition(":")
            if not (sep and index and value):
                raise DatasetFileError(path, f"line {number}: {token!r} is not <index>:<value> (a truncated line?)")
            if not is_decimal(index):
                raise DatasetFileError(path, f"line {number}: feature index {index!r} is not a number in the ASCII "
                                             "digits 0-9")
            if not 1 <= int(index) <= A9A_FEATURES:
                raise DatasetFileError(path, f"line {number}: feature index {index} is outside [1, {A9A_FEATURES}]")
            if int(index) <= previous:
                raise DatasetFileError(path, f"line {number}: feature index {index} follows {previous}; "
                                             "LIBSVM indices must increase")
            if value not in ("1", "1.0", "0", "0.0"):
                raise DatasetFileError(path, f"line {number}: feature {index} has value {value!r}; "
                                             "a9a's features are binary (0 or 1)")
            x[row, int(index) - 1] = int(float(value))
            previous = int(index)
    return x, y


def read_adult_uci(path: str | Path) -> tuple[list[list[str]], np.ndarray]:
    """A UCI adult.data / adult.test file as (per sample its 14 attribute strings, int64 labels in {0, 1}).

    Every row has 15 fields, the continuous ones non-negative integers, the categorical ones a UCI category
    or `?`; the label is <=50K or >50K, with or without adult.test's trailing '.'.
    """
    rows, labels = [], []
    for number, line in _lines(Path(path)):
        if line.startswith("|"):  # adult.test's "|1x3 Cross validator" header
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(ATTRIBUTES) + 1:
            raise DatasetFileError(path, f"line {number}: {len(fields)} fields, a UCI adult row has "
                                         f"{len(ATTRIBUTES) + 1} (14 attributes and the label)")
        *attributes, label = fields
        for name, value in zip(ATTRIBUTES, attributes):
            if name in CONTINUOUS_BINS and not (is_decimal(value) and len(value) <= MAX_DIGITS):
                raise DatasetFileError(path, f"line {number}: {name} {value!r} is not a non-negative integer "
                                             f"(ASCII digits, at most {MAX_DIGITS})")
            if name in CATEGORIES and value != "?" and value not in CATEGORIES[name]:
                raise DatasetFileError(path, f"line {number}: unknown {name} {value!r} (adult.names lists "
                                             f"{len(CATEGORIES[name])} categories and '?')")
        if label.rstrip(".") not in UCI_LABELS:
            raise DatasetFileError(path, f"line {number}: label {label!r} is not <=50K or >50K")
        rows.append(attributes)
        labels.append(UCI_LABELS[label.rstrip(".")])
    if not rows:
        raise DatasetFileError(path, "no samples (only header lines)")
    return rows, np.array(labels, dtype=np.int64)


def _one_hot(rows: list[list[str]], cuts: dict[str, np.ndarray]) -> np.ndarray:
    blocks = []
    for j, name in enumerate(ATTRIBUTES):
        column = [r[j] for r in rows]
        if name in CATEGORIES:
            index = {c: i for i, c in enumerate(CATEGORIES[name])}
            block = np.zeros((len(rows), len(index)), dtype=np.uint8)
            known = [(i, index[v]) for i, v in enumerate(column) if v != "?"]
            if known:
                block[tuple(np.array(known).T)] = 1
        else:
            bins = np.searchsorted(cuts[name], np.array(column, dtype=np.int64), side="right")
            block = np.eye(CONTINUOUS_BINS[name], dtype=np.uint8)[bins]
        blocks.append(block)
    return np.concatenate(blocks, axis=1)


def adult_one_hot(train_path: str | Path,
                  test_path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test) from UCI adult.data / adult.test, encoded as the module docstring
    states: uint8 N x 123 binary features, bins cut at the train split's quantiles."""
    train_rows, y_train = read_adult_uci(train_path)
    test_rows, y_test = read_adult_uci(test_path)
    cuts = {}
    for j, name in enumerate(ATTRIBUTES):
        if name in CONTINUOUS_BINS:
            values = np.array([r[j] for r in train_rows], dtype=np.int64)
            cuts[name] = (np.quantile(values, np.arange(1, 5) / 5) if CONTINUOUS_BINS[name] == 5
                          else np.array([1]))  # capital gain / loss: 0 vs > 0
    return _one_hot(train_rows, cuts), y_train, _one_hot(test_rows, cuts), y_test
