//! `spec.trigger.schedule`: a cron schedule as a Kubernetes CronJob takes
//! it. The croner crate parses it (ranges, steps, names); what Kubernetes
//! does not accept on top of that (seconds, `L`, `W`, `#`, a `TZ=`
//! prefix) is refused here too, so an invalid schedule shows in the
//! stream's status instead of in a CronJob the API server refuses.

use croner::parser::{CronParser, Seconds, Year};

/// The macros Kubernetes accepts besides five fields.
const MACROS: [&str; 7] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// Names a field may use instead of numbers.
const NAMES: [&str; 19] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC", "SUN",
    "MON", "TUE", "WED", "THU", "FRI", "SAT",
];

/// Checks `schedule`; the error says what is wrong in words.
pub fn check_schedule(schedule: &str) -> Result<(), String> {
    let text = schedule.trim();
    if text.starts_with("TZ=") || text.starts_with("CRON_TZ=") {
        return Err(
            "a time zone prefix is not allowed (CronJobs run on the controller's zone; \
                    Kubernetes sets spec.timeZone instead)"
                .into(),
        );
    }
    if let Some(name) = text.strip_prefix('@') {
        return match MACROS.iter().any(|m| m[1..].eq_ignore_ascii_case(name)) {
            true => Ok(()),
            false => Err(format!("unknown macro; use one of {}", MACROS.join(", "))),
        };
    }
    let fields: Vec<&str> = text.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected five fields (minute hour day-of-month month day-of-week), got {}",
            fields.len()
        ));
    }
    for field in &fields {
        let unsupported = field.split([',', '-', '/']).find(|atom| !plain_atom(atom));
        if let Some(atom) = unsupported {
            return Err(format!(
                "{atom:?} is not a number, a name or * (L, W and # are not supported by Kubernetes)"
            ));
        }
    }
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    parser
        .parse(text)
        .map(|_| ())
        .map_err(|error| error.to_string())
}

fn plain_atom(atom: &str) -> bool {
    atom == "*"
        || atom == "?"
        || (!atom.is_empty() && atom.bytes().all(|b| b.is_ascii_digit()))
        || NAMES.iter().any(|n| n.eq_ignore_ascii_case(atom))
}

#[cfg(test)]
mod tests {
    use super::check_schedule;

    #[test]
    fn kubernetes_schedules_pass_and_others_say_why() {
        for ok in [
            "@hourly",
            "@midnight",
            "0 * * * *",
            "*/15 2-5 1,15 JAN-MAR mon-fri",
            "30 3 ? * SUN",
        ] {
            assert_eq!(check_schedule(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("@every 1h", "unknown macro"),
            ("0 * * *", "five fields"),
            ("0 0 * * * *", "five fields"),
            ("61 * * * *", ""),
            ("0 0 L * *", "L, W and #"),
            ("0 0 * * 5#2", "L, W and #"),
            ("TZ=UTC 0 * * * *", "time zone"),
            ("hourly", "five fields"),
        ] {
            let error = check_schedule(bad).expect_err(bad);
            assert!(error.contains(says), "{bad}: {error}");
        }
    }
}
