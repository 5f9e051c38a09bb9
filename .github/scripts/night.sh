#!/usr/bin/env bash
# The night a workflow run records: `date=YYYY-MM-DD` appended to $GITHUB_OUTPUT.
# Called by nightly.yml (publish) and corpus-nightly.yml (prepare) as `bash src/.github/scripts/night.sh`.
#
# The night comes from the run's creation time, read from GitHub's API: every attempt of a run
# has the same created_at (run_started_at moves with each attempt), so a re-run after midnight
# UTC records the same night. For a scheduled run ($SCHEDULE, `M H * * *`) the night is the UTC
# day of the latest slot at or before created_at, as GitHub may create the run late; a schedule
# of another form fails. A manual run ($SCHEDULE empty) takes created_at's UTC day.
#
# Environment: GH_TOKEN (a token with actions: read), SCHEDULE (github.event.schedule), and the
# runner's GITHUB_API_URL, GITHUB_REPOSITORY, GITHUB_RUN_ID, GITHUB_OUTPUT. The token goes to curl
# on stdin, never on its command line.
set -euo pipefail

created=$(printf 'Authorization: Bearer %s\n' "${GH_TOKEN:?no token}" \
  | curl -fsS --retry 3 -H @- -H "Accept: application/vnd.github+json" \
      "$GITHUB_API_URL/repos/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID" \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["created_at"])')
created_s=$(date -u -d "$created" +%s)
day=$(date -u -d "@$created_s" +%F)
if [ -n "${SCHEDULE:-}" ]; then
  read -r minute hour rest <<< "$SCHEDULE"
  if ! [[ "$minute" =~ ^[0-9]+$ && "$hour" =~ ^[0-9]+$ && "$rest" == "* * *" ]]; then
    echo "::error::schedule '$SCHEDULE': the night's date is defined for 'M H * * *' schedules only"; exit 1
  fi
  slot_s=$(date -u -d "$day $hour:$minute" +%s)
  if [ "$created_s" -lt "$slot_s" ]; then day=$(date -u -d "@$((slot_s - 86400))" +%F); fi
fi
echo "night $day (run $GITHUB_RUN_ID created $created)"
echo "date=$day" >> "$GITHUB_OUTPUT"
