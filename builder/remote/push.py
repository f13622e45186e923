"""``kkb push``: from a kernel project to its datasets and kernel on Kaggle.

``push`` builds, then brings Kaggle up to date with as little as possible: a dataset is created or
versioned only when its content hash differs from what Kaggle holds (its ``manifest.json``) or, when
Kaggle cannot say, from the last push recorded in the history; a new kernel version is pushed only
when the notebook, its metadata or a dataset changed. Every wait polls with backoff and has a timeout.
``submit`` pushes (unless given a version), waits for the kernel run, submits that version to the
competition and waits for the score.

Calls that create something on Kaggle are preceded by an *intent* record in the history
(``builder.remote.history``), so a push interrupted after Kaggle acted adopts that version on the next run
instead of creating a duplicate. The library never prints: progress goes to ``settings.progress``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from builder.build import BuildResult, BuildSettings, build_kernel
from builder.bundle.wheels import wheelhouse_source, wheelhouse_to_push
from builder.errors import KkbError, RemoteError, SessionCapReached
from builder.project.credentials import kaggle_username
from builder.project.image_facts import kernel_image
from builder.project.layout import KERNEL_METADATA
from builder.project.spec import KernelSpec, spec_of
from builder.remote.dataset_sync import DatasetResult, sync_dataset
from builder.remote.history import KERNEL_INTENT, KERNEL_REFUSED, MOUNTED, PUSH
from builder.remote.inputs import check_inputs
from builder.remote.kaggle_api import NotFoundError, TransientRemoteError
from builder.remote.kernel_stamp import stamp, stamped_hash, unstamped_bytes
from builder.remote.lock import kernel_lock
from builder.remote.model_weights import attach_model_weights, sync_model_weights
from builder.remote.preflight import check_before_run, planned_run, waited_for_slot
from builder.remote.run_image import record_last_push_image
from builder.remote.session import ProgressEvent, PushSettings, Session, open_session, private_tmpdir

WheelsFound = tuple[str, Path, str]  # the wheelhouse to attach: ref, folder, content hash (or key@version)
S = TypeVar("S", bound=PushSettings)


@dataclass(frozen=True)
class PushResult:
    kernel_id: str
    kernel_url: str
    kernel_version: int | None
    kernel_action: str  # "pushed" | "unchanged" | "adopted"
    code: DatasetResult
    weights: DatasetResult | None  # None: the kernel has no weights dataset
    uploaded_bytes: int
    out_dir: Path
    wheels: DatasetResult | None = None  # the wheelhouse: its dataset, or the helper kernel (action "attached")
    pins: tuple[str, ...] = ()  # kkb's datasets as the kernel's sources name them, owner/slug/N


def push(settings: PushSettings) -> PushResult:
    """Build ``settings.kernel_dir`` and bring its datasets and kernel on Kaggle up to date."""
    settings = with_spec(settings)
    with kernel_lock(Path(settings.kernel_dir), "push", settings.lock_wait_s):
        ctx = LazySession(settings)
        build = build_for_push(settings, ctx)
        return push_built(ctx.get(), build)


def with_spec(settings: S) -> S:
    """``settings`` carrying the loaded kernel.toml (the command's one read), and its ``[push]`` waits where the
    command line gave none."""
    spec = spec_of(settings.spec, settings.kernel_dir)
    return replace(settings, spec=spec, waits=settings.waits.with_spec(spec))


class LazySession:
    """Connects on first use: the build runs offline first, so its errors come before any network."""

    def __init__(self, settings: PushSettings) -> None:
        self.settings = settings
        self._session: Session | None = None

    def get(self) -> Session:
        if self._session is None:
            self._session = open_session(self.settings)
        return self._session


def build_for_push(settings: PushSettings, lazy: LazySession) -> BuildResult:
    if settings.progress is not None:
        settings.progress(ProgressEvent("build", f"building {settings.kernel_dir}"))
    spec = spec_of(settings.spec, settings.kernel_dir)
    owner = settings.owner or _owner_from_credentials(spec, lazy)
    return build_kernel(BuildSettings(kernel_dir=Path(settings.kernel_dir), out_dir=settings.out_dir, owner=owner, spec=spec))


def _owner_from_credentials(spec: KernelSpec, lazy: LazySession) -> str | None:
    """Ask Kaggle only when neither kernel.toml nor KAGGLE_USERNAME/kaggle.json names the owner (token-only)."""
    if spec.kernel.owner or kaggle_username():
        return None
    return lazy.get().adapter.username


def push_built(ctx: Session, build: BuildResult, *, submitting: bool = False) -> PushResult:
    """Bring Kaggle up to date with ``build``; a push that will start a run is checked against Kaggle's limits
    first (``builder.remote.preflight``: nothing is uploaded before a refusal). ``submitting``: for ``kkb submit``,
    whose run must end in a submission."""
    notes = ctx.settings.message or f"kkb push {build.kernel_id}"
    start_bytes = ctx.adapter.uploaded_bytes
    _check_kernel_metadata(Path(build.kernel_dir), build)  # before any upload: a bad kernel is not worth one
    _check_competition(ctx, build)  # the first question to Kaggle: a typo in the slug is said as such
    found_wheels = wheelhouse_to_ship(ctx, build)  # built, intact, and for the image this push gets
    # A new dataset version reaches the kernel only through a new kernel version: every hash counts. They are all
    # known before uploading (the build's, the wheelhouse's), so is whether this push will start a run.
    kernel_hash = _kernel_hash(Path(build.kernel_dir), build.code_hash,
                               (build.weights_hash or "") + (found_wheels[2] if found_wheels else ""))
    # Asked of Kaggle once per push (its version, and the hash its source carries): whether this push starts a run
    # decides the limits check before any upload, and the same answer decides the kernel's push after it.
    current = ctx.adapter.kernel_version(build.kernel_id)
    unchanged = current is not None and _current_is(ctx, build.kernel_id, kernel_hash, current,
                                                    ctx.history.last(PUSH, kernel=build.kernel_id))
    adopted = None if unchanged else _adopt_kernel(ctx, build.kernel_id, kernel_hash, current)
    if not unchanged and adopted is None:  # a new version runs; None after it: --replace deleted the kernel
        current = check_before_run(ctx, planned_run(build, submitting=submitting), current=current)
    code, weights, wheels = sync_bundles(ctx, build, notes, competition_checked=True, wheels=found_wheels)
    pins = pin_sources(Path(build.kernel_dir), [item for item in (code, weights, wheels) if item is not None])
    version, url, action = _sync_kernel(ctx, build, kernel_hash, current, unchanged=unchanged, adopted=adopted)
    uploaded = ctx.adapter.uploaded_bytes - start_bytes
    ctx.history.append(
        PUSH,
        kernel=build.kernel_id,
        kernel_hash=kernel_hash,
        kernel_version=version,
        kernel_pushed=action != "unchanged",
        url=url,
        code_dataset=code.ref,
        code_hash=code.content_hash,
        code_version=code.version,
        weights_dataset=weights.ref if weights else None,
        weights_hash=weights.content_hash if weights else None,
        weights_version=weights.version if weights else None,
        wheels_dataset=wheels.ref if wheels else None,
        wheels_hash=wheels.content_hash if wheels else None,
        wheels_version=wheels.version if wheels else None,
        pins=pins,
        uploaded_bytes=uploaded,
    )
    return PushResult(
        kernel_id=build.kernel_id,
        kernel_url=url,
        kernel_version=version,
        kernel_action=action,
        code=code,
        weights=weights,
        uploaded_bytes=uploaded,
        out_dir=Path(build.out_dir),
        wheels=wheels,
        pins=tuple(pins),
    )


def pin_sources(kernel_dir: Path, synced: list[DatasetResult]) -> list[str]:
    """Pin kkb's datasets in ``kernel-metadata.json`` to the versions just made ready (``owner/slug/N``).

    Kaggle was seen to drop such pins and mount its latest complete version (kaggle-runtime.md §9.3): the pin
    says which version kkb meant, and the run's ``kkb_mounted.json`` says which one it got (``builder.remote.mounted``).
    Returns the pinned sources. The kernel's hash is over the metadata as the build wrote it: a pin is no change."""
    path = kernel_dir / KERNEL_METADATA
    meta = json.loads(path.read_text(encoding="utf-8"))
    versions = {item.ref: item.version for item in synced if item.version}
    sources = [f"{ref}/{versions[ref]}" if ref in versions else ref for ref in meta.get("dataset_sources") or []]
    if sources != meta.get("dataset_sources"):
        meta["dataset_sources"] = sources
        path.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return [source for source in sources if source.rpartition("/")[0] in versions]


def sync_bundles(ctx: Session, build: BuildResult, notes: str, *, competition_checked: bool = False,
                 wheels: WheelsFound | None = None) -> tuple[DatasetResult, DatasetResult | None, DatasetResult | None]:
    """Check the competition, the inputs and the wheelhouse, then bring the weights, code and wheelhouse datasets up
    to date. ``wheels``: the wheelhouse :func:`wheelhouse_to_ship` found already (else it is looked for here).

    Returns (code, weights, the wheelhouse: its dataset, or the helper kernel attached with its key as the hash).
    The rehearsal on Kaggle (``builder.remote.rehearsal``) syncs the very same datasets, so a rehearsal and the real
    kernel read the same bytes."""
    if not competition_checked:
        _check_competition(ctx, build)
    check_inputs(ctx, build)  # every [[inputs]] exists and is readable, before any upload
    if wheels is None:
        wheels = wheelhouse_to_ship(ctx, build)  # built, intact, and for the image this push gets: before any upload
    with private_tmpdir(Path(ctx.settings.kernel_dir), ctx.adapter.endpoint):
        weights = None
        if build.weights_dataset:
            weights = sync_dataset(ctx, "weights", Path(build.weights_dir), build.weights_dataset, str(build.weights_hash),
                                    notes)
        elif build.weights_model:  # [weights] publish = "model"
            synced = sync_model_weights(ctx, build, notes)
            attach_model_weights(Path(build.kernel_dir), synced.instance, synced.version)
            weights = DatasetResult(synced.instance, str(build.weights_hash), synced.version, synced.action,
                                    synced.uploaded_bytes)
        code = sync_dataset(ctx, "code", Path(build.code_dir), build.code_dataset, build.code_hash, notes)
        shipped = _sync_wheelhouse(ctx, build, wheels, notes)
    return code, weights, shipped


def _check_competition(ctx: Session, build: BuildResult) -> None:
    """Kaggle refuses a kernel whose competition it does not know only at the kernel push, after the
    datasets went up: ask first (one cheap call) so a typo in the slug uploads nothing."""
    slug = build.spec.competition.slug
    try:
        ctx.adapter.submissions(slug)
    except NotFoundError as exc:  # only Kaggle's "no such competition": no answer, a 5xx or a 401 say so themselves
        raise type(exc)(f"{Path(ctx.settings.kernel_dir) / 'kernel.toml'}: competition.slug '{slug}': {exc.message}",
                        hint="use the slug from the competition's URL (kaggle.com/competitions/<slug>), and join the "
                             "competition and accept its rules first") from exc


def wheelhouse_to_ship(ctx: Session, build: BuildResult) -> WheelsFound | None:
    """The wheelhouse to attach (ref, folder, content hash or the helper kernel's key@version), refused when
    missing, damaged, or built for another image than the one this push gets (the drift guard: the image the
    kernel's last run recorded, else the newest known). Known before any upload."""
    record_last_push_image(ctx, build.kernel_id)  # the image the last pushed version ran on, once it completed
    if wheelhouse_source(build.spec, build.owner) is None:
        return None
    image = kernel_image(build.spec, build.owner, ctx.adapter.endpoint)
    return wheelhouse_to_push(build.spec, Path(ctx.settings.kernel_dir), build.owner, Path(build.out_dir), image)


def _sync_wheelhouse(ctx: Session, build: BuildResult, found: WheelsFound | None, notes: str) -> DatasetResult | None:
    """Upload the wheelhouse dataset when it changed; a helper kernel's output is attached as it is."""
    if found is None:
        return None
    ref, folder, content_hash = found
    source = wheelhouse_source(build.spec, build.owner)  # not None: it named what was found
    if source is not None and source.kind == "kernel":
        return DatasetResult(ref, content_hash, None, "attached", 0)
    return sync_dataset(ctx, "wheels", folder, ref, content_hash, notes)


# -- kernel -----------------------------------------------------------------------------------


def _kernel_hash(kernel_dir: Path, code_hash: str, weights_hash: str) -> str:
    """What makes a kernel version: its metadata, its notebook, and the datasets it reads."""
    digest = hashlib.sha256()
    for path in sorted(kernel_dir.iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + unstamped_bytes(path) + b"\0")
    digest.update(f"{code_hash}\0{weights_hash}".encode())
    return "sha256:" + digest.hexdigest()


def _check_kernel_metadata(kernel_dir: Path, build: BuildResult) -> None:
    """Refuse to push a kernel that could not run as a code-competition submission."""
    path = kernel_dir / KERNEL_METADATA
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KkbError(f"{path}: cannot read the kernel metadata: {exc}", hint="run kkb build again") from exc
    problems = []
    if meta.get("enable_internet") not in (False, "false"):
        problems.append("enable_internet must be false (Kaggle's default is true)")
    if meta.get("id") != build.kernel_id:
        problems.append(f"id is {meta.get('id')!r}, expected {build.kernel_id!r}")
    sources = set(meta.get("dataset_sources") or [])
    missing = [ref for ref in (build.code_dataset, build.weights_dataset) if ref and ref not in sources]
    if missing:
        problems.append(f"dataset_sources lacks {missing}")
    if not meta.get("competition_sources"):
        problems.append("competition_sources is empty")
    if problems:
        raise KkbError(f"{path}: " + "; ".join(problems), hint="this is a kkb build bug; report it with the file")


def _sync_kernel(ctx: Session, build: BuildResult, kernel_hash: str, current: int | None, *,
                 unchanged: bool, adopted: int | None) -> tuple[int | None, str, str]:
    """Push a new kernel version unless the current one (Kaggle's ``current``) already has ``kernel_hash``
    (``unchanged``: :func:`_current_is`, as ``push_built`` asked it) or an interrupted push made it (``adopted``)."""
    kernel_id = build.kernel_id
    last = ctx.history.last(PUSH, kernel=kernel_id)
    default_url = ctx.adapter.web_url(f"code/{kernel_id}")
    if unchanged:
        if _adopt_kernel(ctx, kernel_id, kernel_hash, current) is not None:  # an interrupted push made it
            return current, default_url, "adopted"
        ctx.emit("kernel", f"{kernel_id} v{current} unchanged")
        url = last.get("url") if last and last.get("kernel_hash") == kernel_hash else None
        return current, str(url or default_url), "unchanged"
    if adopted is not None:
        return adopted, default_url, "adopted"
    timeout = build.spec.kernel.timeout_seconds
    rounds = ctx.rounds()
    while True:
        ctx.history.append(KERNEL_INTENT, kernel=kernel_id, kernel_hash=kernel_hash, version_before=current)
        ctx.emit("kernel", f"pushing {kernel_id}")
        stamp(Path(build.notebook_path), kernel_hash)  # Kaggle keeps it: a fresh clone can tell "unchanged"
        try:
            pushed = ctx.adapter.push_kernel(Path(build.kernel_dir), timeout_seconds=timeout)
        except TransientRemoteError as exc:
            # The push may have gone through with its answer lost (a 5xx after Kaggle committed it): look at
            # Kaggle's versions before pushing again, and again after the pause, so no version is made twice.
            adopted = _adopt_kernel(ctx, kernel_id, kernel_hash, current)
            if adopted is None:
                ctx.retry_round(rounds, f"pushing {kernel_id}", exc)
                adopted = _adopt_kernel(ctx, kernel_id, kernel_hash, current)
            if adopted is not None:
                ctx.emit("kernel", f"the push was answered \"{exc.message}\", but Kaggle had created {kernel_id} "
                                   f"v{adopted}: kept it (nothing pushed twice)")
                return adopted, default_url, "adopted"
            continue
        except RemoteError as exc:
            if isinstance(exc, SessionCapReached) and waited_for_slot(ctx, rounds, exc):
                continue
            # Kaggle answered and refused (it may still have saved a version without its inputs): the
            # next push must push again, not adopt that version as if an interrupted push had made it.
            ctx.history.append(KERNEL_REFUSED, kernel=kernel_id, kernel_hash=kernel_hash, reason=exc.message)
            raise
        version = pushed.version if pushed.version is not None else ctx.adapter.kernel_version(kernel_id)
        ctx.emit("kernel", f"{kernel_id} v{version} pushed")
        return version, pushed.url or default_url, "pushed"


def _current_is(ctx: Session, kernel_id: str, kernel_hash: str, current: int, last: dict[str, object] | None) -> bool:
    """Whether Kaggle's current version is this kernel: the hash its code carries decides (so a fresh clone
    with no history pushes nothing); the history only when Kaggle's copy has no stamp (an older kkb)."""
    if _refused_last(ctx, kernel_hash):
        return False  # Kaggle saved that version without its inputs: it is not a good one to keep
    mounted = ctx.history.last(MOUNTED, kernel=kernel_id, kernel_version=current)
    if mounted is not None and mounted.get("ok") is False:
        return False  # its run read other inputs than kkb pushed (a dropped pin): a new version of the same content
    remote = stamped_hash(ctx.adapter.kernel_source(kernel_id))
    if remote is not None:
        return bool(remote == kernel_hash)
    return bool(last and last.get("kernel_hash") == kernel_hash and current == last.get("kernel_version"))


def _refused_last(ctx: Session, kernel_hash: str) -> bool:
    """Whether the last push of ``kernel_hash`` this project recorded is one Kaggle refused."""
    for record in reversed(ctx.history.records()):
        if record.get("kernel_hash") == kernel_hash and record.get("event") in (PUSH, KERNEL_REFUSED):
            return bool(record.get("event") == KERNEL_REFUSED)
    return False


def _adopt_kernel(ctx: Session, kernel_id: str, kernel_hash: str, current: int | None) -> int | None:
    """A version an interrupted push created: the intent is open and Kaggle moved past it."""
    intent = ctx.history.open_intent(KERNEL_INTENT, PUSH, "kernel_hash", kernel_hash)
    if intent is None or intent.get("kernel") != kernel_id:
        return None
    if ctx.history.open_intent(KERNEL_INTENT, KERNEL_REFUSED, "kernel_hash", kernel_hash) is None:
        return None  # Kaggle refused that push: whatever it saved is not ours to adopt
    now = ctx.adapter.kernel_version(kernel_id) if current is None else current
    before = intent.get("version_before")
    if now is None or (before is not None and now <= before):
        return None
    ctx.emit("kernel", f"{kernel_id}: adopting v{now} from an interrupted push")
    return now


