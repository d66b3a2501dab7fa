"""A test-only stand-in for the calls AIRS-Bench tasks make of HuggingFace `datasets`.

It is not the datasets library: it stores a dataset as JSON (dataset.json: the columns and their
features; a dataset dict as dataset_dict.json naming its splits, each split a subdirectory, as the
real library lays out a DatasetDict) and implements load_from_disk, save_to_disk, Dataset and
DatasetDict with column_names, features, len, column and row indexing, remove_columns,
select_columns, select, rename_column, to_list, to_dict and to_pandas (when pandas is there).
sealrun's tests install it in their images (airs/datasetstest); production images carry the real
library.
"""
import json
import os

__version__ = "0.0.0+sealrun.standin"

_DATASET = "dataset.json"
_DICT = "dataset_dict.json"


def _feature(values):
    for v in values:
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int):
            return "int64"
        if isinstance(v, float):
            return "float64"
        if isinstance(v, str):
            return "string"
        if isinstance(v, list):
            return "list"
    return "null"


class Dataset:
    def __init__(self, columns, features=None):
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError("columns of different lengths: %s" % {k: len(v) for k, v in columns.items()})
        self._columns = {k: list(v) for k, v in columns.items()}
        self.features = dict(features or {k: _feature(v) for k, v in self._columns.items()})

    @classmethod
    def from_dict(cls, mapping):
        return cls(mapping)

    @property
    def column_names(self):
        return list(self._columns)

    @property
    def num_rows(self):
        return len(self)

    def __len__(self):
        for v in self._columns.values():
            return len(v)
        return 0

    def __getitem__(self, key):
        if isinstance(key, str):
            if key not in self._columns:
                raise KeyError("Column %s not in the dataset. Current columns in the dataset: %s" % (key, self.column_names))
            return list(self._columns[key])
        if isinstance(key, slice):
            return {k: v[key] for k, v in self._columns.items()}
        return {k: v[key] for k, v in self._columns.items()}

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def remove_columns(self, names):
        names = [names] if isinstance(names, str) else list(names)
        for n in names:
            if n not in self._columns:
                raise ValueError("Column name %s not in the dataset. Current columns in the dataset: %s" % (n, self.column_names))
        keep = {k: v for k, v in self._columns.items() if k not in names}
        return Dataset(keep, {k: self.features[k] for k in keep})

    def select_columns(self, names):
        names = [names] if isinstance(names, str) else list(names)
        return self.remove_columns([c for c in self.column_names if c not in names])

    def rename_column(self, old, new):
        cols = {(new if k == old else k): v for k, v in self._columns.items()}
        feats = {(new if k == old else k): v for k, v in self.features.items()}
        return Dataset(cols, feats)

    def select(self, indices):
        indices = list(indices)
        return Dataset({k: [v[i] for i in indices] for k, v in self._columns.items()}, self.features)

    def to_dict(self):
        return {k: list(v) for k, v in self._columns.items()}

    def to_list(self):
        return [self[i] for i in range(len(self))]

    def to_pandas(self):
        import pandas  # the real library needs it too

        return pandas.DataFrame(self.to_dict())

    def save_to_disk(self, path):
        os.makedirs(path, exist_ok=True)
        tmp = os.path.join(path, _DATASET + ".tmp")
        with open(tmp, "w") as f:
            json.dump({"columns": self._columns, "features": self.features}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(path, _DATASET))

    def __repr__(self):
        return "Dataset({features: %s, num_rows: %d})" % (self.column_names, len(self))


class DatasetDict(dict):
    def save_to_disk(self, path):
        os.makedirs(path, exist_ok=True)
        for name, ds in self.items():
            ds.save_to_disk(os.path.join(path, name))
        with open(os.path.join(path, _DICT), "w") as f:
            json.dump({"splits": list(self)}, f)

    @property
    def column_names(self):
        return {k: v.column_names for k, v in self.items()}

    def remove_columns(self, names):
        return DatasetDict({k: v.remove_columns(names) for k, v in self.items()})


def load_from_disk(path, **_):
    if os.path.isfile(os.path.join(path, _DICT)):
        with open(os.path.join(path, _DICT)) as f:
            splits = json.load(f)["splits"]
        return DatasetDict({s: load_from_disk(os.path.join(path, s)) for s in splits})
    p = os.path.join(path, _DATASET)
    if not os.path.isfile(p):
        raise FileNotFoundError("Directory %s is neither a `Dataset` directory nor a `DatasetDict` directory." % path)
    with open(p) as f:
        d = json.load(f)
    return Dataset(d["columns"], d.get("features"))
