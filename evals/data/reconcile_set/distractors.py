"""Distractors: one memory is the one the turns are about, among memories that look alike (other
people with the same value, the same person's past events that name it, near-miss relations).
The careful answer is a single operation on the right memory: INVALIDATE (correction false)
when the speaker's own one-valued fact changed, NOOP when it was only said again. Each family
is one row with its own relation, distractors and wording."""

from __future__ import annotations

from datetime import date

from evals.data.reconcile_set.kit import CITIES, EMPLOYERS, PEOPLE, case, day, fact

# name, action, predicate, kind, the speaker's memory ({a}), distractors as (whose, predicate,
# text) with whose "p" (the speaker) or "q"/"r" (others), the turns ({a} old, {b} new, {q}),
# the new fact ({b}; NOOP rows restate {a}), options.
ROWS = [
    (
        "left_employer_joined_colleague",
        "INVALIDATE",
        "works_at",
        "profile",
        "{p} works at {a}.",
        [("q", "works_at", "{q} works at {b}."), ("r", "worked_at", "{r} used to work at {a}.")],
        ["I left {a}; from today I work at {b}, with {q}."],
        "{p} works at {b}.",
        EMPLOYERS,
    ),
    (
        "moved_where_friend_lives",
        "INVALIDATE",
        "lives_in",
        "profile",
        "{p} lives in {a}.",
        [("q", "lives_in", "{q} lives in {b}."), ("p", "visited", "{p} visited {b} in 2022.")],
        ["Moved to {b} last weekend — {q} and I are neighbours now!"],
        "{p} lives in {b}.",
        CITIES,
    ),
    (
        "still_in_city_others_moved",
        "NOOP",
        "lives_in",
        "profile",
        "{p} lives in {a}.",
        [("q", "lives_in", "{q} lives in {a}."), ("r", "moved_to", "{r} moved away from {a}.")],
        ["Everyone's leaving {a} but I'm staying put, it's home."],
        "{p} still lives in {a}.",
        CITIES,
    ),
    (
        "new_car_same_as_brother",
        "INVALIDATE",
        "car",
        "profile",
        "{p} drives a {a}.",
        [("q", "car", "{q} drives a {b}."), ("p", "rented", "{p} rented a {b} on holiday.")],
        ["Traded in the {a}. Got a {b}, same as {q}'s, he's smug about it."],
        "{p} drives a {b}.",
        ["Toyota Yaris", "Ford Focus", "Tesla Model 3", "VW Golf"],
    ),
    (
        "diet_changed_partner_too",
        "INVALIDATE",
        "diet",
        "profile",
        "{p} is {a}.",
        [("q", "diet", "{q} is {b}."), ("p", "tried", "{p} tried being {b} for a week once.")],
        ["Okay it's official, I'm fully {b} now, like {q}."],
        "{p} is {b}.",
        ["vegetarian", "vegan", "pescatarian"],
    ),
    (
        "title_change_among_team",
        "INVALIDATE",
        "job_title",
        "profile",
        "{p} is a {a}.",
        [("q", "job_title", "{q} is a {b}."), ("r", "job_title", "{r} is a {a}.")],
        ["HR finally updated my title from {a} to {b}."],
        "{p} is a {b}.",
        ["junior developer", "senior developer", "staff engineer"],
    ),
    (
        "phone_number_new_mum_old",
        "INVALIDATE",
        "phone",
        "profile",
        "{p}'s phone number is {a}.",
        [("q", "phone", "{q}'s phone number is {b}."), ("p", "called", "{p} called {a} support line.")],
        ["new sim!! my number is {b} now, the {a} one is dead"],
        "{p}'s phone number is {b}.",
        ["555-0110", "555-0122", "555-0135", "555-0189"],
    ),
    (
        "email_same_domain_coworkers",
        "INVALIDATE",
        "email",
        "profile",
        "{p}'s email is {a}.",
        [("q", "email", "{q}'s email is {b}."), ("r", "email", "{r}'s email is {a}.")],
        ["Please update my contact: {b} replaces {a}."],
        "{p}'s email is {b}.",
        ["ana@work.example", "a.r@home.example", "ar77@mail.example"],
    ),
    (
        "shift_swap_with_colleague",
        "INVALIDATE",
        "works_shift",
        "fact",
        "{p} works the {a} shift.",
        [("q", "works_shift", "{q} works the {b} shift."), ("p", "covered", "{p} covered a {b} shift once.")],
        ["{q} and I swapped: I'm on {b} shifts permanently now."],
        "{p} works the {b} shift.",
        ["night", "day", "early", "late"],
    ),
    (
        "married_status_friends",
        "INVALIDATE",
        "status",
        "profile",
        "{p} is {a}.",
        [("q", "status", "{q} is {b}."), ("r", "status", "{r} is {a}.")],
        ["Small update on my side: I'm {b} now."],
        "{p} is {b}.",
        ["single", "engaged", "married", "divorced"],
    ),
    (
        "same_employer_reaffirmed",
        "NOOP",
        "works_at",
        "profile",
        "{p} works at {a}.",
        [("q", "works_at", "{q} works at {a}."), ("r", "interviewed_at", "{r} interviewed at {b}.")],
        ["Nah I didn't take the {b} offer, still at {a} with {q}."],
        "{p} works at {a}.",
        EMPLOYERS,
    ),
    (
        "address_moved_next_to_sister",
        "INVALIDATE",
        "address",
        "profile",
        "{p} lives at {a}.",
        [("q", "address", "{q} lives at {b}."), ("p", "stored_boxes_at", "{p} stores boxes at {b}.")],
        ["New address: {b} — right next to my sister {q}'s place."],
        "{p} lives at {b}.",
        ["3 Oak Lane", "5 Oak Lane", "21 Station Road", "9 Kiln Street"],
    ),
    (
        "partner_changed_friend_dating",
        "INVALIDATE",
        "partner",
        "profile",
        "{p}'s partner is {a}.",
        [("q", "partner", "{q}'s partner is {b}."), ("p", "met", "{p} met {b} at a wedding.")],
        ["{a} and I split up in the spring. I'm with {b} now."],
        "{p}'s partner is {b}.",
        ["Jamie", "Robin", "Alex", "Sasha"],
    ),
    (
        "gym_same_as_coworker_kept",
        "NOOP",
        "member_of",
        "fact",
        "{p} is a member of {a}.",
        [("q", "member_of", "{q} is a member of {b}."), ("p", "trial_at", "{p} had a free trial at {b}.")],
        ["Still a {a} member, the trial at {b} didn't convince me."],
        "{p} is a member of {a}.",
        ["FitLife gym", "Peak Climbing", "the YMCA"],
    ),
    (
        "job_change_spanish_team",
        "INVALIDATE",
        "works_at",
        "profile",
        "{p} works at {a}.",
        [("q", "works_at", "{q} works at {a}."), ("r", "works_at", "{r} works at {b}.")],
        ["Dejé {a} — ahora trabajo en {b}, con {r}."],
        "{p} works at {b}.",
        EMPLOYERS,
    ),
    (
        "city_change_trip_distractor",
        "INVALIDATE",
        "lives_in",
        "profile",
        "{p} lives in {a}.",
        [("p", "visited", "{p} visited {b} for a conference."), ("q", "lives_in", "{q} lives in {a}.")],
        ["Remember the {b} conference? I liked it so much I relocated there."],
        "{p} lives in {b}.",
        CITIES,
    ),
    (
        "car_kept_neighbour_sold",
        "NOOP",
        "car",
        "profile",
        "{p} drives a {a}.",
        [("q", "sold", "{q} sold a {a}."), ("q", "car", "{q} drives a {b}.")],
        ["{q} sold his {a}, but mine's still going strong."],
        "{p} drives a {a}.",
        ["Subaru Forester", "Honda Jazz", "Peugeot 208"],
    ),
    (
        "title_promotion_formal",
        "INVALIDATE",
        "job_title",
        "profile",
        "{p} is a {a}.",
        [("r", "job_title", "{r} is a {b}."), ("p", "applied_for", "{p} applied for a {b} role in 2022.")],
        ["I am writing to let you know I have been appointed {b}, effective today."],
        "{p} is a {b}.",
        ["deputy head", "head teacher", "department head"],
    ),
    (
        "diet_kept_despite_family",
        "NOOP",
        "diet",
        "profile",
        "{p} is {a}.",
        [("q", "diet", "{q} is {b}."), ("r", "diet", "{r} is {b}.")],
        ["The whole family went {b} but I'm still {a}, no change here."],
        "{p} is {a}.",
        ["vegetarian", "vegan", "keto"],
    ),
    (
        "married_to_name_common",
        "INVALIDATE",
        "married_to",
        "profile",
        "{p} is married to {a}.",
        [("q", "married_to", "{q} is married to {a}."), ("p", "friends_with", "{p} is friends with {b}.")],
        ["After the divorce from {a} I married {b} — yes, my old friend!"],
        "{p} is married to {b}.",
        ["Chris", "Kim", "Morgan", "Taylor"],
    ),
    (
        "phone_same_kept_texting",
        "NOOP",
        "phone",
        "profile",
        "{p}'s phone number is {a}.",
        [("q", "phone", "{q}'s phone number is {b}."), ("r", "phone", "{r}'s phone number is {b}.")],
        ["same number as always btw, {a}, ignore the group chat"],
        "{p}'s phone number is {a}.",
        ["555-0111", "555-0144", "555-0177"],
    ),
    (
        "shift_change_german",
        "INVALIDATE",
        "works_shift",
        "fact",
        "{p} works the {a} shift.",
        [("r", "works_shift", "{r} works the {a} shift."), ("q", "works_shift", "{q} works the {b} shift.")],
        ["Ab nächster Woche: {b} shift for me, kein {a} mehr."],
        "{p} works the {b} shift.",
        ["night", "morning", "evening"],
    ),
    (
        "job_after_internship",
        "INVALIDATE",
        "works_at",
        "profile",
        "{p} works at {a}.",
        [("p", "interned_at", "{p} interned at {b} in 2021."), ("q", "works_at", "{q} works at {b}.")],
        ["{b} hired me back full-time, the place I interned — goodbye {a}."],
        "{p} works at {b}.",
        EMPLOYERS,
    ),
    (
        "status_hinglish",
        "INVALIDATE",
        "status",
        "profile",
        "{p} is {a}.",
        [("q", "status", "{q} is {a}."), ("r", "status", "{r} is {b}.")],
        ["Ab main {b} hoon, finally, {a} wala phase over."],
        "{p} is {b}.",
        ["a student", "employed", "self-employed"],
    ),
    (
        "lives_in_reaffirmed_portuguese",
        "NOOP",
        "lives_in",
        "profile",
        "{p} lives in {a}.",
        [("q", "lives_in", "{q} lives in {b}."), ("p", "born_in", "{p} was born in {b}.")],
        ["Nasci em {b}, mas moro em {a} há anos, continuo lá."],
        "{p} lives in {a}.",
        CITIES,
    ),
    (
        "email_work_vs_private_terse",
        "INVALIDATE",
        "email",
        "profile",
        "{p}'s email is {a}.",
        [("p", "work_email", "{p}'s work email is {b}."), ("q", "email", "{q}'s email is {a}.")],
        ["private mail changed: {b}. not the work one"],
        "{p}'s email is {b}.",
        ["lee@post.example", "lee.w@mail.example", "lwang@inbox.example"],
    ),
    (
        "partner_kept_friend_breakup",
        "NOOP",
        "partner",
        "profile",
        "{p}'s partner is {a}.",
        [("q", "partner", "{q}'s partner was {b}."), ("r", "partner", "{r}'s partner is {b}.")],
        ["{q} broke up with {b}, but {a} and I are solid, don't worry."],
        "{p}'s partner is {a}.",
        ["Noa", "Eli", "Jules", "Remy"],
    ),
    (
        "address_rambling_move",
        "INVALIDATE",
        "address",
        "profile",
        "{p} lives at {a}.",
        [("r", "address", "{r} lives at {a}."), ("p", "viewed", "{p} viewed a flat at {b}.")],
        [
            "So the landlord sold the building, long story, we looked at like six places,",
            "and in the end we signed for {b}, moved in yesterday, {a} is history.",
        ],
        "{p} lives at {b}.",
        ["14 Birch Ave", "2 Canal Walk", "30 Hill Rise", "6 Rope Yard"],
    ),
    (
        "job_title_downshift",
        "INVALIDATE",
        "job_title",
        "profile",
        "{p} is a {a}.",
        [("q", "job_title", "{q} is a {a}."), ("r", "job_title", "{r} is a {b}.")],
        ["I stepped back from being {a}; I'm a {b} again, less stress."],
        "{p} is a {b}.",
        ["manager", "designer", "consultant"],
    ),
    (
        "car_company_vs_own",
        "INVALIDATE",
        "car",
        "profile",
        "{p} drives a {a}.",
        [("p", "company_car", "{p} has a company car, a {b}."), ("q", "car", "{q} drives a {a}.")],
        ["Gave the {a} to my daughter; I drive my own {b} now, not just the company one."],
        "{p} drives a {b}.",
        ["Renault Clio", "Mazda 3", "Hyundai Kona", "Volvo XC40"],
    ),
]


def _template(row):
    name, action, predicate, kind, mine_text, others, turns, new_text, options = row

    def template(rng, p, when):
        q, r = rng.sample([person for person in PEOPLE if person != p], 2)
        a, b = rng.sample(options, 2)
        names = {"p": p, "q": q, "r": r}
        values = {"p": p, "q": q, "r": r, "a": a, "b": b}
        mine = fact(mine_text.format(**values), p, predicate, a, day(rng, date(2023, 1, 1)), kind)
        existing = [mine] + [
            fact(text.format(**values), names[whose], relation, None, day(rng, date(2022, 6, 1)), "fact")
            for whose, relation, text in others
        ]
        rng.shuffle(existing)
        value = b if action == "INVALIDATE" else a
        new = [fact(new_text.format(**values), p, predicate, value, when, kind)]
        op = {"action": action, "target": existing.index(mine) + 1}
        if action == "INVALIDATE":
            op["correction"] = False
        said = [turn.format(**values) for turn in turns]
        return case("distractors", p, when, said, existing, new, [op])

    template.__name__ = name
    return template


TEMPLATES = [_template(row) for row in ROWS]
