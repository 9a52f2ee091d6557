"""Relative dates: the turns say when something happened relative to the day they were said
("the day before yesterday", "last Tuesday", "a fortnight ago"), and the new fact carries the
absolute date. The careful answer is ADD with `valid_at` resolved against the turn's day
(`expected_valid_at`). Each family is one row: its own event, domain, wording and time
expression."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta

from evals.data.reconcile_set.kit import case, fact, filler


def days_ago(n: int) -> Callable[[date], date]:
    return lambda when: when - timedelta(days=n)


def last_weekday(weekday: int) -> Callable[[date], date]:
    """'last Tuesday': the latest such day strictly before the turn's day."""
    return lambda when: when - timedelta(days=(when.weekday() - weekday - 1) % 7 + 1)


def first_of_last_month(when: date) -> date:
    return (when.replace(day=1) - timedelta(days=1)).replace(day=1)


def new_years_day(when: date) -> date:
    return date(when.year, 1, 1) if when > date(when.year, 1, 1) else date(when.year - 1, 1, 1)


# name, turns ({x} a choice from the options), fact with {d} the resolved date, predicate, kind,
# when it was (a function of the turn's day), options.
ROWS = [
    (
        "job_started_yesterday",
        ["I started my new job at {x} yesterday."],
        "{p} started working at {x} on {d}.",
        "works_at",
        "profile",
        days_ago(1),
        ["Acme Robotics", "Northwind Labs", "the city library"],
    ),
    (
        "wedding_day_before_yesterday",
        ["We got married the day before yesterday, in {x}!!"],
        "{p} got married in {x} on {d}.",
        "married_in",
        "event",
        days_ago(2),
        ["Porto", "Kyoto", "Galway"],
    ),
    (
        "surgery_last_week",
        ["Recovering ok — had my {x} surgery last week."],
        "{p} had {x} surgery on {d}.",
        "had_surgery",
        "event",
        days_ago(7),
        ["knee", "wisdom tooth", "shoulder"],
    ),
    (
        "fortnight_ago_promotion",
        ["A fortnight ago they made me {x}, still sinking in."],
        "{p} was promoted to {x} on {d}.",
        "job_title",
        "profile",
        days_ago(14),
        ["team lead", "head nurse", "senior editor"],
    ),
    (
        "three_days_ago_puppy",
        ["Three days ago a {x} puppy joined the family."],
        "{p} got a {x} puppy on {d}.",
        "has_pet",
        "event",
        days_ago(3),
        ["beagle", "collie", "dachshund"],
    ),
    (
        "last_tuesday_exam",
        ["Passed my {x} exam last Tuesday, woohoo"],
        "{p} passed the {x} exam on {d}.",
        "passed_exam",
        "event",
        last_weekday(1),
        ["driving", "bar", "citizenship"],
    ),
    (
        "last_saturday_concert",
        ["Saw {x} live last Saturday, best night of the year."],
        "{p} saw {x} in concert on {d}.",
        "attended",
        "event",
        last_weekday(5),
        ["Fleetwood Mac", "Rosalía", "Radiohead"],
    ),
    (
        "last_monday_diagnosis_formal",
        ["I was diagnosed with {x} last Monday; I would like you to keep that in mind."],
        "{p} was diagnosed with {x} on {d}.",
        "diagnosed_with",
        "event",
        last_weekday(0),
        ["type 2 diabetes", "asthma", "anaemia"],
    ),
    (
        "ten_days_ago_quit_smoking",
        ["Ten days ago I smoked my last {x}. Not going back."],
        "{p} quit smoking ({x}) on {d}.",
        "quit",
        "event",
        days_ago(10),
        ["cigarette", "cigar"],
    ),
    (
        "last_month_moved_spanish",
        ["El mes pasado nos mudamos — we moved into a flat in {x} at the start of last month."],
        "{p} moved into a flat in {x} on {d}.",
        "moved_to",
        "event",
        first_of_last_month,
        ["Valencia", "Sevilla", "Bilbao"],
    ),
    (
        "this_morning_baby",
        ["Our baby {x} was born this morning!!!"],
        "{p}'s baby {x} was born on {d}.",
        "child_born",
        "event",
        days_ago(0),
        ["Amara", "Leo", "Ines"],
    ),
    (
        "new_year_resolution_gym",
        ["Been going to {x} every day since New Year's Day, proud of myself."],
        "{p} has gone to {x} every day since {d}.",
        "routine",
        "fact",
        new_years_day,
        ["the gym", "the pool", "yoga class"],
    ),
    (
        "four_days_ago_accident",
        ["Bit shaken, someone rear-ended my {x} four days ago. Everyone's fine."],
        "{p}'s {x} was rear-ended on {d}.",
        "accident",
        "event",
        days_ago(4),
        ["car", "scooter", "van"],
    ),
    (
        "last_friday_resigned_terse",
        ["resigned from {x} last friday. no regrets"],
        "{p} resigned from {x} on {d}.",
        "resigned_from",
        "event",
        last_weekday(4),
        ["Globex", "Initech", "Blue Harbor Bank"],
    ),
    (
        "week_ago_sunday_race",
        ["A week ago Sunday I ran my first {x} — two hours flat."],
        "{p} ran a first {x} on {d}.",
        "ran",
        "event",
        lambda when: last_weekday(6)(when) - timedelta(days=7),
        ["half marathon", "trail race", "10k"],
    ),
    (
        "five_days_ago_german_course",
        ["Vor fünf Tagen hat mein {x}-Kurs angefangen, it's intense."],
        "{p} started a {x} course on {d}.",
        "enrolled_in",
        "event",
        days_ago(5),
        ["German", "welding", "sign language"],
    ),
    (
        "yesterday_evening_engaged",
        ["{x} proposed yesterday evening and I said YES"],
        "{p} got engaged to {x} on {d}.",
        "engaged_to",
        "event",
        days_ago(1),
        ["Jonah", "Priyanka", "Tomás"],
    ),
    (
        "two_weeks_ago_broke_arm",
        ["Broke my {x} two weeks ago skiing, typing one-handed."],
        "{p} broke their {x} on {d} while skiing.",
        "injury",
        "event",
        days_ago(14),
        ["left wrist", "right arm"],
    ),
    (
        "last_thursday_house_offer",
        ["The offer on the house in {x} was accepted last Thursday!"],
        "{p}'s offer on a house in {x} was accepted on {d}.",
        "bought_house_in",
        "event",
        last_weekday(3),
        ["Dublin", "Toronto", "Madrid"],
    ),
    (
        "six_weeks_ago_started_therapy",
        ["I started seeing a {x} six weeks ago and it helps."],
        "{p} started seeing a {x} on {d}.",
        "sees",
        "event",
        days_ago(42),
        ["therapist", "physiotherapist"],
    ),
    (
        "last_wednesday_published",
        ["My article on {x} got published last Wednesday :)"],
        "{p} published an article on {x} on {d}.",
        "published",
        "event",
        last_weekday(2),
        ["urban heat islands", "sourdough science", "open-source maps"],
    ),
    (
        "nine_days_ago_adopted_portuguese",
        ["Há nove dias adotamos uma {x} — we adopted her nine days ago."],
        "{p} adopted a {x} on {d}.",
        "adopted",
        "event",
        days_ago(9),
        ["gata", "cadela"],
    ),
    (
        "yesterday_lost_job_rambling",
        [
            "Honestly it's been a weird couple of days, I don't even know where to start,",
            "but the short version is {x} let me go yesterday with the rest of the team.",
        ],
        "{p} was laid off by {x} on {d}.",
        "laid_off_by",
        "event",
        days_ago(1),
        ["Northwind Labs", "a small bakery", "Acme Robotics"],
    ),
    (
        "last_sunday_graduation_parent",
        ["My son graduated from {x} last Sunday, I cried the whole ceremony."],
        "{p}'s son graduated from {x} on {d}.",
        "child_graduated",
        "event",
        last_weekday(6),
        ["nursing school", "the police academy", "university"],
    ),
    (
        "eight_days_ago_first_solo_flight",
        ["Eight days ago: first solo flight in a {x}. Still buzzing."],
        "{p} flew solo for the first time in a {x} on {d}.",
        "flew",
        "event",
        days_ago(8),
        ["Cessna 152", "glider"],
    ),
    (
        "three_weeks_ago_vegetarian",
        ["I went {x} three weeks ago, so no meat for me at the barbecue."],
        "{p} became {x} on {d}.",
        "diet",
        "profile",
        days_ago(21),
        ["vegetarian", "vegan"],
    ),
    (
        "last_month_start_band",
        ["We formed a {x} band at the start of last month, gig next week!"],
        "{p} formed a {x} band on {d}.",
        "formed",
        "event",
        first_of_last_month,
        ["jazz", "punk", "folk"],
    ),
    (
        "six_days_ago_citizenship",
        ["Six days ago I became a {x} citizen. Officially!"],
        "{p} became a {x} citizen on {d}.",
        "citizen_of",
        "profile",
        days_ago(6),
        ["Canadian", "Irish", "German"],
    ),
    (
        "last_tuesday_hinglish_interview",
        ["Last Tuesday ko {x} ka interview tha, and I got the offer!"],
        "{p} interviewed at {x} on {d} and got an offer.",
        "interviewed_at",
        "event",
        last_weekday(1),
        ["Infosys", "Zomato", "Globex"],
    ),
    (
        "twelve_days_ago_sold_car",
        ["Sold the old {x} twelve days ago, carless and happy."],
        "{p} sold a {x} on {d}.",
        "sold",
        "event",
        days_ago(12),
        ["Volvo", "Fiat Panda", "Honda Civic"],
    ),
    (
        "day_before_yesterday_hiked",
        ["Climbed {x} the day before yesterday, legs destroyed."],
        "{p} climbed {x} on {d}.",
        "climbed",
        "event",
        days_ago(2),
        ["Ben Nevis", "Mount Fuji", "Pico"],
    ),
]


def _template(row):
    name, turns, content, predicate, kind, resolve, options = row

    def template(rng, p, when):
        x = rng.choice(options)
        then = resolve(when)
        existing = filler(rng, p, 1 + rng.randrange(2), {x})
        new = [fact(content.format(p=p, x=x, d=then.isoformat()), p, predicate, x, then, kind)]
        said = [turn.format(x=x) for turn in turns]
        return case(
            "relative_date",
            p,
            when,
            said,
            existing,
            new,
            [{"action": "ADD"}],
            expected_valid_at=then.isoformat(),
        )

    template.__name__ = name
    return template


TEMPLATES = [_template(row) for row in ROWS]
