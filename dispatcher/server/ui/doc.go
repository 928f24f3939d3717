// Package ui is the dispatcher's web UI, served under api.PathUI by every
// replica (the server routes it): an overview of the cluster, jobs (with
// filters and pages, the summaries of forgotten jobs marked as history), a
// job (its groups, why its pending tasks wait, its tasks and their logs,
// cancel; for a forgotten job, its summary), nodes and a node (its pods
// and tiers, the offline tier's overcommit quota from its last heartbeat,
// its drain state, drain and undrain for an admin), an
// appmaster's capboxes, queues (weights, caps against use) and the recent
// scheduling rounds.
//
// The pages are html/template shells and one script and one style sheet,
// embedded: no build step and nothing fetched from elsewhere. A page holds
// no data: its script reads the JSON API (api.PathJobs, api.PathNodes,
// api.PathCluster, ...) with the bearer token the user signs in with,
// which it keeps in the tab's sessionStorage and sends as the API's
// clients do, so the UI has the API's tokens and roles and no others: a
// reader's token can read but neither cancel nor drain, and the server
// refuses what a token may not do whatever the page shows. Cancel, drain
// and undrain act on a second click. The pages follow the watch
// stream (api.PathWatch) to redraw jobs as they change, and re-read node
// and round figures every two seconds.
//
// Every answer forbids inline scripts, framing and other origins
// (Content-Security-Policy), and the script writes every value as text.
package ui
