"""Where a lake keeps its files: the state directory (landing, processing, done, quarantine, the
ingest's lock and ids) and the Delta table of raw samples with its rollups beside it. Light (no
Spark, no Arrow): the Connect server's bookkeeping, the command line and the service read it
without loading the ingest."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lake.landing import fsync_dir
from lake.schema import table_path

if TYPE_CHECKING:
    from kbot_settings import KbotSettings

TABLE_NAME = "samples"


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` durably: a temporary file, fsync, rename, fsync the folder."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


@dataclass(frozen=True)
class LakeLayout:
    state_dir: Path
    table: str  # the Delta table of raw samples: a local path or a Hadoop URI

    @classmethod
    def from_settings(
        cls, settings: KbotSettings, *, lake_dir: str | None = None, table: str | None = None
    ) -> "LakeLayout":
        """The layout the settings name (KBOT_LAKE_DIR, else KBOT_HOME/lake; KBOT_LAKE_URI), or
        ``lake_dir`` / ``table`` when given."""
        state = Path(lake_dir or settings.lake_dir).expanduser().resolve()
        uri = table or settings.kbot_lake_uri or str(state / TABLE_NAME)
        if not is_uri(uri):
            uri = str(Path(uri.removeprefix("file://")).expanduser().resolve())
        return cls(state, uri)

    @property
    def landing(self) -> Path:
        return self.state_dir / "landing"

    @property
    def processing(self) -> Path:
        return self.state_dir / "processing"

    @property
    def done(self) -> Path:
        return self.state_dir / "done"

    @property
    def quarantine(self) -> Path:
        return self.state_dir / "quarantine"

    @property
    def lock(self) -> Path:
        return self.state_dir / "ingest.lock"

    @property
    def app_id_file(self) -> Path:
        return self.state_dir / "ingest.id"

    @property
    def last_txn_file(self) -> Path:
        return self.state_dir / "txn.last"

    @property
    def rollups_pending_file(self) -> Path:
        return self.state_dir / "rollups.pending"

    def rollup(self, resolution: str) -> str:
        return table_path(self.table, resolution)

    def make_dirs(self) -> None:
        for d in (self.landing, self.processing, self.done, self.quarantine):
            d.mkdir(parents=True, exist_ok=True)

    def app_id(self) -> str:
        """This state dir's Delta ``txnAppId``: two collectors writing one table must not share
        one (each one's versions only increase on its own)."""
        p = self.app_id_file
        if p.exists():
            text = p.read_text().strip()
            if text:
                return text
        new = f"kbot-ingest-{uuid.uuid4().hex[:16]}"
        write_atomic(p, new + "\n")
        return new
