"""Several facts at once: the turns carry two to four facts that need different operations (a
change, something already known, something new, a refinement), and the careful answer is one
operation per fact, in the order the facts come. Each family is one row with its own mix of
operations, domains and wording."""

from __future__ import annotations

from datetime import date

from evals.data.reconcile_set.kit import CITIES, EMPLOYERS, case, day, fact

DIETS = ["vegetarian", "vegan", "pescatarian"]
TITLES = ["nurse", "paramedic", "teacher", "pharmacist"]
CARS = ["Fiat Panda", "Kia Niro", "VW Polo", "Toyota Prius"]
SHIFTS = ["night", "early", "late"]
DRINKS = ["black coffee", "green tea", "oat lattes", "chai"]
SPORTS = ["running", "swimming", "cycling", "climbing"]
INSTRUMENTS = ["piano", "ukulele", "cello", "trumpet"]
PETS = ["kitten", "puppy", "rabbit", "tortoise"]
LANGS = ["Italian", "Korean", "Dutch", "Arabic"]
BOOKS = ["science fiction", "crime novels", "poetry", "history books"]

# A part: (action, predicate, kind, the existing memory or None for ADD, the new fact, options).
# {p} the speaker; {aN}/{bN} part N's old and new value. Turns use the same names.
CHANGE_HOME = ("INVALIDATE", "lives_in", "profile", "{p} lives in {a}.", "{p} lives in {b}.", CITIES)
CHANGE_JOB = ("INVALIDATE", "works_at", "profile", "{p} works at {a}.", "{p} works at {b}.", EMPLOYERS)
CHANGE_DIET = ("INVALIDATE", "diet", "profile", "{p} is {a}.", "{p} is {b}.", DIETS)
CHANGE_TITLE = ("INVALIDATE", "job_title", "profile", "{p} is a {a}.", "{p} is a {b}.", TITLES)
CHANGE_CAR = ("INVALIDATE", "car", "profile", "{p} drives a {a}.", "{p} drives a {b}.", CARS)
CHANGE_SHIFT = (
    "INVALIDATE",
    "works_shift",
    "fact",
    "{p} works the {a} shift.",
    "{p} works the {b} shift.",
    SHIFTS,
)
KEPT_DRINK = ("NOOP", "drinks", "preference", "{p} drinks {a}.", "{p} still drinks {a}.", DRINKS)
KEPT_SPORT = ("NOOP", "does_sport", "fact", "{p} goes {a} regularly.", "{p} regularly goes {a}.", SPORTS)
KEPT_HOME = ("NOOP", "lives_in", "profile", "{p} lives in {a}.", "{p} still lives in {a}.", CITIES)
KEPT_JOB = ("NOOP", "works_at", "profile", "{p} works at {a}.", "{p} still works at {a}.", EMPLOYERS)
NEW_PET = ("ADD", "has_pet", "profile", None, "{p} has a {b}.", PETS)
NEW_LANG = ("ADD", "learning", "fact", None, "{p} is learning {b}.", LANGS)
NEW_INSTRUMENT = ("ADD", "plays", "fact", None, "{p} plays the {b}.", INSTRUMENTS)
NEW_BOOKS = ("ADD", "reads", "preference", None, "{p} reads {b}.", BOOKS)
MORE_SPORT = ("UPDATE", "does_sport", "fact", "{p} goes {a}.", "{p} goes {a} three mornings a week.", SPORTS)
MORE_BOOKS = (
    "UPDATE",
    "reads",
    "preference",
    "{p} reads {a}.",
    "{p} reads {a}, mostly in translation.",
    BOOKS,
)
MORE_DRINK = (
    "UPDATE",
    "drinks",
    "preference",
    "{p} drinks {a}.",
    "{p} drinks {a}, always without sugar.",
    DRINKS,
)

# name, parts, turns.
ROWS = [
    (
        "moved_still_tea_got_pet",
        [CHANGE_HOME, KEPT_DRINK, NEW_PET],
        ["Updates: I moved to {b0}, I still live on {a1}, and I got a {b2}."],
    ),
    (
        "new_job_new_language",
        [CHANGE_JOB, NEW_LANG],
        ["Left {a0} for {b0}, and since the team is international I've started {b1} lessons."],
    ),
    (
        "diet_and_sport_refined",
        [CHANGE_DIET, MORE_SPORT],
        ["Two things: I'm {b0} now (bye {a0} days), and {a1} is three mornings a week these days."],
    ),
    (
        "title_shift_same_employer",
        [CHANGE_TITLE, CHANGE_SHIFT, KEPT_JOB],
        ["Same hospital, {a2}, but I'm a {b0} now and off {a1} shifts, I do {b1} ones."],
    ),
    (
        "car_and_instrument_terse",
        [CHANGE_CAR, NEW_INSTRUMENT],
        ["sold the {a0}, bought a {b0}. also: {b1} lessons, day 3"],
    ),
    (
        "home_kept_job_changed",
        [KEPT_HOME, CHANGE_JOB],
        ["Still in {a0}, don't worry, but I switched from {a1} to {b1}."],
    ),
    (
        "rambling_three_updates",
        [CHANGE_HOME, NEW_BOOKS, KEPT_SPORT],
        [
            "OK where do I start. The move to {b0} is done, boxes everywhere.",
            "I've been reading a lot of {b1} to unwind, and yes, still {a2} every week, that never stops.",
        ],
    ),
    (
        "spanish_job_and_pet",
        [CHANGE_JOB, NEW_PET],
        ["Noticias: ya no estoy en {a0}, ahora en {b0} — y adoptamos un {b1}!"],
    ),
    (
        "refine_drink_add_lang",
        [MORE_DRINK, NEW_LANG],
        ["{a0} for me, never with sugar, and I've picked up {b1} on my commute."],
    ),
    (
        "home_and_diet_changed_lang_new",
        [CHANGE_HOME, CHANGE_DIET, NEW_LANG],
        ["New city ({b0}), new me: I went {b1} the week we arrived, and I'm learning {b2}."],
    ),
    (
        "formal_status_report",
        [CHANGE_TITLE, KEPT_HOME, NEW_BOOKS],
        [
            "For your records: I now hold the position of {b0}; my residence remains {a1};",
            "and I have joined a reading group on {b2}.",
        ],
    ),
    (
        "shift_and_car_changed_job_kept",
        [CHANGE_SHIFT, CHANGE_CAR, KEPT_JOB],
        [
            "Since I'm on {b0} shifts now I needed a reliable car, so the {a1} went and a {b1} came.",
            "Same employer, {a2}, before you ask.",
        ],
    ),
    (
        "hinglish_home_and_sport",
        [CHANGE_HOME, MORE_SPORT],
        ["{b0} shift ho gaye finally, and {a1} ab three mornings a week karta hoon."],
    ),
    (
        "new_pet_new_instrument_kept_drink",
        [NEW_PET, NEW_INSTRUMENT, KEPT_DRINK],
        ["The {b0} sits on the sofa while I practise {b1}, me with my {a2} as usual."],
    ),
    (
        "german_job_changed_drink_kept",
        [CHANGE_JOB, KEPT_DRINK],
        ["Neuer Job bei {b0} (tschüss {a0}), aber {a1} trinke ich immer noch."],
    ),
    (
        "books_refined_home_kept",
        [MORE_BOOKS, KEPT_HOME],
        ["{a0}, mostly translated ones — the library in {a1} has a great shelf of them."],
    ),
    (
        "job_title_and_language",
        [CHANGE_TITLE, NEW_LANG],
        ["Promoted from {a0} to {b0}! They're also paying for my {b1} course."],
    ),
    (
        "car_and_pet_texting",
        [NEW_PET, CHANGE_CAR],
        ["got a {b0} lol and had to swap the {a1} for a {b1}, more room for the crate"],
    ),
    (
        "portuguese_three",
        [CHANGE_HOME, KEPT_JOB, NEW_INSTRUMENT],
        ["Mudei para {b0}, continuo na {a1} (remote), e comecei a tocar {b2}."],
    ),
    (
        "sport_kept_diet_changed_drink_refined",
        [KEPT_SPORT, CHANGE_DIET, MORE_DRINK],
        ["Still {a0} weekly; went {b1} in January; and it's {a2}, always without sugar, if you're buying."],
    ),
    (
        "two_turn_job_changed_home_kept",
        [CHANGE_JOB, KEPT_HOME],
        ["Big month.", "New job at {b0}, and no, we're staying in {a1}."],
    ),
    (
        "shift_and_books",
        [CHANGE_SHIFT, NEW_BOOKS],
        ["{b0} shifts now, so I read {b1} on my breaks instead of sleeping."],
    ),
    (
        "pet_language_home_kept",
        [KEPT_HOME, NEW_PET, NEW_LANG],
        ["Life in {a0} is calm: a {b1} at home and {b2} podcasts in the kitchen."],
    ),
    (
        "title_changed_sport_kept",
        [CHANGE_TITLE, KEPT_SPORT],
        ["New badge says {b0}. Otherwise same old — {a1} at the weekend."],
    ),
    (
        "everything_changed_and_a_pet",
        [CHANGE_CAR, CHANGE_DIET, CHANGE_JOB, NEW_PET],
        [
            "Everything changed at once: {b0} instead of the {a0}, {b1} instead of {a1},",
            "{b2} instead of {a2}, and a {b3} joined us.",
        ],
    ),
    (
        "instrument_and_drink_kept",
        [NEW_INSTRUMENT, KEPT_DRINK],
        ["Bought a {b0}! Celebrated with {a1}, naturally."],
    ),
    (
        "moved_back_books_refined",
        [CHANGE_HOME, MORE_BOOKS],
        ["Back in {b0} after all these years, and still into {a1} — translations mostly."],
    ),
    (
        "non_native_job_pet",
        [CHANGE_JOB, NEW_PET, KEPT_SPORT],
        ["I am change job, now in {b0}. Also we have {b1} now. {a2} I still do, every week."],
    ),
    (
        "lang_new_shift_changed_home_kept",
        [NEW_LANG, CHANGE_SHIFT, KEPT_HOME],
        ["Learning {b0} on the {b1} shift breaks; still living in {a2}."],
    ),
    (
        "diet_refined_drink_new_books",
        [CHANGE_DIET, MORE_DRINK, NEW_BOOKS],
        ["Going {b0}, {a1} without sugar, and a stack of {b2} for the holidays."],
    ),
]


def _template(row):
    name, parts, turns = row

    def template(rng, p, when):
        values, existing, targets, new = {"p": p}, [], [], []
        for index, (action, predicate, kind, old, said, options) in enumerate(parts):
            a, b = rng.sample(options, 2)
            values[f"a{index}"], values[f"b{index}"] = a, b
            memory = None
            if old is not None:
                memory = fact(old.format(p=p, a=a), p, predicate, a, day(rng, date(2023, 1, 1)), kind)
                existing.append(memory)
            value = b if action in ("INVALIDATE", "ADD") else a
            new.append(fact(said.format(p=p, a=a, b=b), p, predicate, value, when, kind))
            targets.append((action, memory))
        rng.shuffle(existing)
        ops = []
        for action, memory in targets:
            op = {"action": action}
            if memory is not None:
                op["target"] = existing.index(memory) + 1
            if action == "INVALIDATE":
                op["correction"] = False
            ops.append(op)
        text = [turn.format(**values) for turn in turns]
        return case("several_facts", p, when, text, existing, new, ops)

    template.__name__ = name
    return template


TEMPLATES = [_template(row) for row in ROWS]
