"""Fresh episodes: the same kind of series as old_episodes (a trip, a project, a move), but it
happened in the last weeks and is being recalled: the details are still in use, so the careful
answer keeps every memory as it is."""

from __future__ import annotations

from datetime import timedelta

from evals.data.consolidate_set.kit import CITIES, ago, case, memory


def _start(rng, today):
    return ago(today, rng.randrange(5, 25))


def this_months_trip(rng, p, today):
    city = rng.choice(CITIES)
    start = _start(rng, today)
    items = [
        memory(f"{p} arrived in {city} for a conference.", start, "event", 4),
        memory(f"{p} gave a talk about sensor networks in {city}.", start + timedelta(days=1), "event", 3),
        memory(f"{p} met a possible client from {city}.", start + timedelta(days=2), "event", 5),
    ]
    return case(rng, today, items, [])


def ongoing_app_launch(rng, p, today):
    app = rng.choice(["Fernway", "Quillbox", "Tidepool"])
    start = _start(rng, today)
    items = [
        memory(f"{p}'s team set the {app} launch for next month.", start, "event", 6),
        memory(f"{p} fixed the login bug in {app}.", start + timedelta(days=3), "event", 2),
        memory(f"{p} is waiting on the design review of {app}.", start + timedelta(days=4), "event", 3),
    ]
    return case(rng, today, items, [])


def moving_house_now(rng, p, today):
    start = _start(rng, today)
    items = [
        memory(f"{p} signed the lease for a flat on Elm Street.", start, "event", 4),
        memory(f"{p} booked movers for the 28th.", start + timedelta(days=2), "event", 3),
        memory(f"{p} is packing the books this weekend.", start + timedelta(days=4), "event", 2),
    ]
    return case(rng, today, items, [])


def physio_after_injury(rng, p, today):
    start = _start(rng, today)
    items = [
        memory(f"{p} sprained an ankle playing football.", start, "event", 5),
        memory(f"{p} has physiotherapy twice a week.", start + timedelta(days=3), "fact", 4),
        memory(f"{p} may not run until the ankle heals.", start + timedelta(days=3), "fact", 6),
    ]
    return case(rng, today, items, [])


TEMPLATES = [this_months_trip, ongoing_app_launch, moving_house_now, physio_after_injury]
