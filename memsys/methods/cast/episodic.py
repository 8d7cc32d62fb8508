"""CAST's episodic index: views → character streams → scenes (§3.1, §3.3.1–3.3.2, Algorithm 1)
and its search (§3.2: scene kNN filtered by the question's persons, times and places).

Everything here is independent of how persons, places and summaries were obtained (LLM or
lite): the method hands in per-message persons and locations, and summaries afterwards.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from memsys.nlp import ResolvedTime
from memsys.propositions import phrase_key
from memsys.types import Conversation

MAIN, SUPPORTING = "main", "supporting"
#: Who gets a copy of a view (§3.2 "replicate the view into each identified person's stream").
STREAM_MEMBERS = ("all", "speakers")
#: Where a view's mentioned persons are read: its whole window (v.x) or its central message.
MENTION_SCOPES = ("window", "message")
MISSING_LOCATION = ("unmet", "met")


@dataclass(frozen=True)
class SceneRule:
    """Thresholds of the two-of-three rule: Δt, Δℓ (equal place names), Δτ (topic cosine)."""

    max_gap: timedelta = timedelta(days=1)
    topic_threshold: float = 0.7
    missing_location: str = "unmet"


@dataclass(frozen=True)
class View:
    """v_i: the window around message ``center`` (§3.1), its time and place (the central
    message's), the persons speaking in it and those it mentions, and the streams it joins."""

    center: int
    window: tuple[int, ...]
    time: datetime | None
    location: str | None
    speakers: tuple[str, ...]
    mentioned: tuple[str, ...]
    streams: tuple[str, ...]

    @property
    def participants(self) -> tuple[str, ...]:
        """v.P: everyone speaking in the window, then everyone it mentions."""
        return tuple(dict.fromkeys(self.speakers + self.mentioned))


def build_views(
    conversation: Conversation,
    persons: Sequence[Sequence[str]],
    locations: Sequence[str | None],
    *,
    window: int,
    members: str,
    mention_scope: str,
) -> list[View]:
    """One view per message, its window clamped inside its session (a window does not reach
    into another day's conversation). ``persons[i]`` are the persons message ``i`` mentions,
    already mapped to speakers' names where they are one.

    A view joins the stream of its central message's speaker (§3.3.1) and, with
    ``members="all"``, the streams of the persons mentioned in its ``mention_scope``; with
    ``"speakers"`` (the paper's speaker_only ablation) mentions are ignored.
    """
    turns = conversation.turns
    positions = {t.turn_id: i for i, t in enumerate(turns)}
    views = []
    for session in conversation.sessions:
        ids = [positions[t.turn_id] for t in session.turns]
        for local, center in enumerate(ids):
            span = tuple(ids[max(0, local - window) : local + window + 1])
            speakers = tuple(dict.fromkeys(turns[i].speaker for i in span))
            scope = span if mention_scope == "window" else (center,)
            named = [p for i in scope for p in persons[i]] if members == "all" else []
            mentioned = tuple(dict.fromkeys(p for p in named if p not in speakers))
            streams = tuple(dict.fromkeys((turns[center].speaker, *named)))
            views.append(
                View(
                    center,
                    span,
                    turns[center].timestamp,
                    locations[center],
                    speakers,
                    mentioned,
                    streams,
                )
            )
    return views


def aggregate_scenes(
    times: Sequence[datetime | None],
    locations: Sequence[str | None],
    topics: np.ndarray,
    rule: SceneRule,
) -> list[list[int]]:
    """Algorithm 1 on one character stream: views (in time order) → scenes (lists of view
    indices). Each view joins the first scene, in creation order, meeting two of the three
    conditions (time gap to the scene's latest view ≤ Δt; same place as the scene's most
    frequent one; topic cosine with the scene's renormalized mean ≥ Δτ), else starts a new one.
    Places compare by :func:`~memsys.propositions.phrase_key`."""
    scenes: list[list[int]] = []
    latest: list[datetime | None] = []
    topic_sums: list[np.ndarray] = []
    places: list[Counter[str]] = []
    for index, (time, place, topic) in enumerate(zip(times, locations, topics, strict=True)):
        key = phrase_key(place) if place else None
        for s, members in enumerate(scenes):
            last = latest[s]
            time_ok = time is not None and last is not None and abs(time - last) <= rule.max_gap
            scene_place = places[s].most_common(1)[0][0] if places[s] else None
            if key is None or scene_place is None:
                place_ok = rule.missing_location == "met"
            else:
                place_ok = key == scene_place
            centroid = topic_sums[s] / (np.linalg.norm(topic_sums[s]) or 1.0)
            topic_ok = float(centroid @ topic) >= rule.topic_threshold
            if time_ok + place_ok + topic_ok >= 2:
                members.append(index)
                if time is not None and (last is None or time > last):
                    latest[s] = time
                topic_sums[s] = topic_sums[s] + topic
                if key is not None:
                    places[s][key] += 1
                break
        else:
            scenes.append([index])
            latest.append(time)
            topic_sums.append(np.array(topic, dtype=np.float64))
            places.append(Counter([key] if key is not None else []))
    return scenes


@dataclass(frozen=True)
class Scene:
    """One scene of one character's profile (π(c) is the character's scenes by start time)."""

    character: str
    role: str
    positions: tuple[int, ...]
    start: datetime | None
    end: datetime | None
    location: str | None
    participants: dict[str, str]
    summary: str
    summary_source: str

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["positions"] = list(self.positions)
        data["start"] = self.start.isoformat() if self.start else None
        data["end"] = self.end.isoformat() if self.end else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scene:
        moments = {
            k: datetime.fromisoformat(data[k]) if data[k] else None for k in ("start", "end")
        }
        return cls(**{**data, **moments, "positions": tuple(data["positions"])})


def scene_of(character: str, views: Sequence[View]) -> Scene:
    """A scene of ``character``'s stream: a participant who speaks in one of its views is a
    main character, one only mentioned a supporting one (§3.3.1); summary still empty."""
    speaking = {s for v in views for s in v.speakers}
    participants = {
        p: (MAIN if p in speaking else SUPPORTING) for v in views for p in v.participants
    }
    participants.setdefault(character, MAIN if character in speaking else SUPPORTING)
    times = [v.time for v in views if v.time is not None]
    places = Counter(v.location for v in views if v.location)
    return Scene(
        character=character,
        role=participants[character],
        positions=tuple(sorted({i for v in views for i in v.window})),
        start=min(times) if times else None,
        end=max(times) if times else None,
        location=places.most_common(1)[0][0] if places else None,
        participants=dict(sorted(participants.items())),
        summary="",
        summary_source="",
    )


def build_scenes(views: Sequence[View], topics: np.ndarray, rule: SceneRule) -> list[Scene]:
    """Every character stream aggregated into scenes (Algorithm 1), sorted by start."""
    streams: dict[str, list[int]] = {}
    for index, view in enumerate(views):
        for person in view.streams:
            streams.setdefault(person, []).append(index)
    scenes = []
    for character, members in streams.items():
        members.sort(key=lambda i: (views[i].time or datetime.min, views[i].center))
        groups = aggregate_scenes(
            [views[i].time for i in members],
            [views[i].location for i in members],
            topics[members],
            rule,
        )
        scenes.extend(scene_of(character, [views[members[g]] for g in group]) for group in groups)
    scenes.sort(key=lambda s: (s.start or datetime.min, s.positions[0], s.character))
    return scenes


def extractive_summary(
    scene: Scene, texts: Sequence[str], vectors: np.ndarray, messages: int
) -> str:
    """Lite φ(s): the ``messages`` messages closest to the scene's mean, in time order, under a
    line naming the character, role, others present, date and place."""
    rows = list(scene.positions)
    centroid = vectors[rows].mean(axis=0)
    best = sorted(np.argsort(-(vectors[rows] @ centroid))[:messages])
    others = [n for n in scene.participants if n != scene.character]
    date = f"{scene.start.day} {scene.start:%B %Y}" if scene.start else "undated"
    place = f" at {scene.location}" if scene.location else ""
    header = (
        f"{scene.character} ({scene.role} character) with "
        f"{', '.join(others) or 'no one else'}, {date}{place}:"
    )
    return "\n".join([header, *(texts[rows[b]] for b in best)])


@dataclass(frozen=True)
class EpisodicQuery:
    """What the episodic filters read from a question, already resolved."""

    characters: frozenset[str]
    moments: tuple[ResolvedTime, ...]
    places: frozenset[str]


def scene_filters(query: EpisodicQuery, date_slack: timedelta) -> list[Callable[[Scene], bool]]:
    """§3.2's filters, in the order applied: persons, time, place. A filter a question gives
    nothing for keeps every scene; a scene without a place passes the place filter."""
    return [
        lambda s: s.character in query.characters if query.characters else True,
        lambda s: (
            any(time_matches(s, m, date_slack) for m in query.moments) if query.moments else True
        ),
        lambda s: (
            s.location is None or phrase_key(s.location) in query.places if query.places else True
        ),
    ]


def search_scenes(
    scenes: Sequence[Scene],
    scene_vectors: np.ndarray,
    passage_vectors: np.ndarray,
    query_vector: np.ndarray,
    query: EpisodicQuery,
    *,
    top_k: int,
    date_slack: timedelta,
) -> list[int]:
    """E_epi(q): the top-k messages of the episodic index. Scenes pass the filters (a filter that
    would leave none is skipped), the ``top_k`` nearest to the question are mapped back to their
    messages, ranked scene by scene and by cosine with the question within a scene."""
    candidates = list(range(len(scenes)))
    for keep in scene_filters(query, date_slack):
        candidates = [i for i in candidates if keep(scenes[i])] or candidates
    if not candidates:
        return []
    similarity = scene_vectors[candidates] @ query_vector
    ranked: list[int] = []
    for rank in np.argsort(-similarity, kind="stable")[:top_k]:
        positions = list(scenes[candidates[rank]].positions)
        order = np.argsort(-(passage_vectors[positions] @ query_vector), kind="stable")
        ranked.extend(positions[i] for i in order if positions[i] not in ranked)
    return ranked[:top_k]


def time_matches(scene: Scene, moment: ResolvedTime, date_slack: timedelta) -> bool:
    """Whether a scene's span meets a resolved time expression at its granularity: the same
    year or month; a day within ``date_slack``; a week (resolved to one of its days) within 7
    days."""
    if scene.start is None or scene.end is None:
        return False
    when = moment.timestamp
    if moment.granularity == "year":
        return scene.start.year <= when.year <= scene.end.year
    if moment.granularity == "month":
        return (
            (scene.start.year, scene.start.month)
            <= (when.year, when.month)
            <= (scene.end.year, scene.end.month)
        )
    slack = timedelta(days=7) if moment.granularity == "week" else date_slack
    return scene.start - slack <= when <= scene.end + slack
