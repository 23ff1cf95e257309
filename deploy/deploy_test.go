// Package deploy_test checks what an admin copies from deploy/: the
// Prometheus rules and scrape config load in promtool and their alerts
// behave as their unit tests say, the Grafana dashboard is valid JSON whose
// queries parse and name only metrics the daemon exports, the systemd unit
// passes systemd-analyze, and the MTA snippets ask for the macros the
// milter uses.
package deploy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/milter"
)

// run runs a program in dir to its end. What bounds it is the CPU time it
// uses, not the wall time (rule 7 of docs/testing.md): promtool's rule
// tests take about 6 s of CPU, and two minutes of wall time, the bound
// this had, ran out under nice 19 on a loaded machine. A minute of CPU is
// a program that does not end; one blocked without using CPU is left to
// go test's -timeout.
func run(t *testing.T, dir, name string, args ...string) (string, error) {
	t.Helper()
	var out strings.Builder
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return out.String(), err
		case <-tick.C:
			// An error is a process gone since the tick: Wait answers.
			if cpu, err := testenv.ProcessCPU(cmd.Process.Pid); err == nil && cpu > time.Minute {
				cmd.Process.Kill()
				err := <-done
				return out.String(), fmt.Errorf("%s used %v of CPU, more than a minute: killed (%v)", name, cpu, err)
			}
		}
	}
}

func TestPromtoolCheckRules(t *testing.T) {
	promtool := testenv.Program(t, "promtool")
	if out, err := run(t, "prometheus", promtool, "check", "rules", "bulkmilter.rules.yml"); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

func TestPromtoolCheckConfig(t *testing.T) {
	promtool := testenv.Program(t, "promtool")
	if out, err := run(t, "prometheus", promtool, "check", "config", "prometheus.yml"); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}

// The alert rules' unit tests: each alert fires when it should, with the
// annotations it renders, and stays quiet when it should.
func TestPromtoolTestRules(t *testing.T) {
	promtool := testenv.Program(t, "promtool")
	files := []string{"bulkmilter.rules.test.yml", "bulkmilter.rules.slow-test.yml"}
	if out, err := run(t, "prometheus", promtool, append([]string{"test", "rules"}, files...)...); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// Read as YAML, as Prometheus reads them.
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct{ Record, Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "prometheus/bulkmilter.rules.yml")), &rules); err != nil {
		t.Fatal(err)
	}
	// Same result in any evaluation order: a rule that reads a recording
	// is in the recording's group, after it. Prometheus runs a group's
	// rules in order but the groups on their own schedules, and promtool
	// in a random order (the slow tests failed one run in a few when the
	// alerts were a group of their own).
	recorded := map[string]string{} // record → group
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = g.Name
			}
		}
	}
	var alerts []string
	for _, g := range rules.Groups {
		before := map[string]bool{}
		for _, r := range g.Rules {
			for rec, grp := range recorded {
				if strings.Contains(r.Expr, rec) && !before[rec] {
					t.Errorf("%s%s reads %s, recorded in group %s: put it after the recording, in the same group", r.Alert, r.Record, rec, grp)
				}
			}
			if r.Record != "" {
				before[r.Record] = true
			}
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
		}
	}
	// Every alert is exercised by a unit test.
	tested := map[string]bool{}
	for _, f := range files {
		var tf struct {
			GroupEvalOrder []string `yaml:"group_eval_order"`
			Tests          []struct {
				AlertRuleTest []struct {
					Alertname string
				} `yaml:"alert_rule_test"`
			}
		}
		if err := yaml.Unmarshal([]byte(readFile(t, "prometheus/"+f)), &tf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(tf.GroupEvalOrder) > 0 {
			t.Errorf("%s sets group_eval_order: the rules must not need one", f)
		}
		for _, tc := range tf.Tests {
			for _, a := range tc.AlertRuleTest {
				tested[a.Alertname] = true
			}
		}
	}
	if len(alerts) == 0 {
		t.Fatal("no alert read from bulkmilter.rules.yml")
	}
	for _, a := range alerts {
		if !tested[a] {
			t.Errorf("alert %s has no unit test in %v", a, files)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exported returns the names of the metrics milterd exports with their
// types: bulkmilter's own from docs/metrics.md (generated from the registry
// and checked by the metrics package's tests), the Go and process
// collectors' from a registry built the way the daemon builds it.
func exported(t *testing.T) map[string]string {
	t.Helper()
	names := map[string]string{}
	row := regexp.MustCompile("^\\| `([a-z_:]+)` \\| (\\w+) \\|")
	sc := bufio.NewScanner(strings.NewReader(readFile(t, "../docs/metrics.md")))
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			names[m[1]] = m[2]
		}
	}
	reg := prometheus.NewRegistry()
	metrics.New(reg)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if _, ok := names[f.GetName()]; !ok {
			names[f.GetName()] = strings.ToLower(f.GetType().String())
		}
	}
	if names["bulkmilter_messages_total"] != "counter" || names["process_resident_memory_bytes"] == "" {
		t.Fatalf("metric list looks wrong: %v", names)
	}
	names["up"] = "gauge" // Prometheus's own
	return names
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	ranges     = regexp.MustCompile(`\[[^\]]*\]`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// identifiers returns the identifiers of a PromQL expression, without
// label values, ranges and subquery steps.
func identifiers(expr string) []string {
	return identifier.FindAllString(ranges.ReplaceAllString(quoted.ReplaceAllString(expr, `""`), ""), -1)
}

// metricNames returns the metric names a PromQL expression selects: the
// identifiers that name a bulkmilter, Go or process metric, or "up", with
// label values removed first.
func metricNames(expr string) []string {
	var out []string
	for _, id := range identifiers(expr) {
		if strings.HasPrefix(id, "bulkmilter_") || strings.HasPrefix(id, "go_") || strings.HasPrefix(id, "process_") || id == "up" {
			out = append(out, id)
		}
	}
	return out
}

// checkName reports a problem if name is not exported; a histogram's
// _bucket, _sum and _count series count as the histogram.
func checkName(name string, exported map[string]string) error {
	if _, ok := exported[name]; ok {
		return nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if typ, ok := exported[base]; ok {
				if typ != "histogram" && typ != "summary" {
					return fmt.Errorf("%s: %s is a %s, not a histogram", name, base, typ)
				}
				return nil
			}
		}
	}
	return fmt.Errorf("%s is not a metric milterd exports (see docs/metrics.md)", name)
}

// grafanaExprs collects every PromQL expression in the dashboard: panel
// targets, template variable queries and annotations.
func grafanaExprs(v any, where string, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			switch s, _ := val.(string); {
			case k == "expr" && s != "":
				out[where+"."+k+"#"+strconv.Itoa(len(out))] = s
			case k == "query" && s != "" && strings.Contains(s, "("):
				out[where+"."+k+"#"+strconv.Itoa(len(out))] = s
			case k == "definition" && s != "":
				out[where+"."+k+"#"+strconv.Itoa(len(out))] = s
			default:
				name := where + "." + k
				if title, ok := x["title"].(string); ok {
					name = where + "[" + title + "]"
				}
				grafanaExprs(val, name, out)
			}
		}
	case []any:
		for i, e := range x {
			grafanaExprs(e, fmt.Sprintf("%s[%d]", where, i), out)
		}
	}
}

// promqlOf turns a Grafana query into plain PromQL: dashboard variables get
// values, label_values(...) becomes its series selector.
func promqlOf(q string) string {
	q = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$job", "bulkmilter", "$instance", ".*").Replace(q)
	if inner, ok := strings.CutPrefix(q, "label_values("); ok {
		inner = strings.TrimSuffix(inner, ")")
		if i := strings.LastIndex(inner, ","); i >= 0 && !strings.Contains(inner[i:], "}") {
			inner = inner[:i]
		}
		q = inner
	}
	return q
}

// The dashboard is valid JSON, every query parses as PromQL (promtool
// checks them as recording rules) and names only exported metrics, and
// every bulkmilter metric with an operator meaning appears somewhere.
func TestGrafanaDashboard(t *testing.T) {
	raw := readFile(t, "grafana/bulkmilter.json")
	var dash map[string]any
	if err := json.Unmarshal([]byte(raw), &dash); err != nil {
		t.Fatalf("grafana/bulkmilter.json: %v", err)
	}
	if dash["title"] != "bulkmilter" || dash["uid"] != "bulkmilter" {
		t.Errorf("title %v, uid %v", dash["title"], dash["uid"])
	}
	exprs := map[string]string{}
	grafanaExprs(dash, "dashboard", exprs)
	if len(exprs) < 20 {
		t.Fatalf("found only %d queries in the dashboard", len(exprs))
	}
	names := exported(t)
	used := map[string]bool{}
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, k := range keys {
		q := promqlOf(exprs[k])
		found := metricNames(q)
		if len(found) == 0 {
			t.Errorf("%s: no metric in %q", k, exprs[k])
		}
		for _, n := range found {
			if err := checkName(n, names); err != nil {
				t.Errorf("%s: %v", k, err)
			}
			used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")] = true
		}
		b, _ := json.Marshal(q)
		fmt.Fprintf(&rules, "      - record: dashboard:query%d\n        expr: %s\n", i, b)
	}
	for n := range names {
		if strings.HasPrefix(n, "bulkmilter_") && !used[n] && n != "bulkmilter_sessions_total" && n != "bulkmilter_config_last_reload_success_timestamp_seconds" {
			t.Errorf("the dashboard does not show %s", n)
		}
	}

	promtool := testenv.Program(t, "promtool")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.rules.yml"), []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, dir, promtool, "check", "rules", "dashboard.rules.yml"); err != nil {
		t.Errorf("dashboard queries do not parse: %v\n%s\n%s", err, out, rules.String())
	}
}

// The alert and recording rules name only exported metrics or recording
// rules defined in the same file.
func TestRulesUseExportedMetrics(t *testing.T) {
	rules := readFile(t, "prometheus/bulkmilter.rules.yml")
	names := exported(t)
	recorded := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+- record: (\S+)`).FindAllStringSubmatch(rules, -1) {
		recorded[m[1]] = true
	}
	var exprs []string
	inExpr := false
	for _, line := range strings.Split(rules, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "expr:"):
			exprs = append(exprs, strings.TrimPrefix(trimmed, "expr:"))
			inExpr = true
		case inExpr && (trimmed == "" || strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "for:") || strings.HasPrefix(trimmed, "labels:") || strings.HasPrefix(trimmed, "- ")):
			inExpr = false
		case inExpr:
			exprs[len(exprs)-1] += " " + trimmed
		}
	}
	if len(exprs) < 15 {
		t.Fatalf("found %d expressions", len(exprs))
	}
	for _, e := range exprs {
		for _, id := range identifiers(e) {
			if strings.Contains(id, ":") {
				if !recorded[id] {
					t.Errorf("%q uses %s, which no recording rule defines", e, id)
				}
				continue
			}
			if strings.HasPrefix(id, "bulkmilter_") || id == "up" {
				if err := checkName(id, names); err != nil {
					t.Errorf("%q: %v", e, err)
				}
			}
		}
	}
}

// The Postfix and Sendmail snippets list, per stage, exactly the macros the
// milter asks for.
func TestMacroLists(t *testing.T) {
	want := milter.Macros()
	set := func(names []string) string {
		s := append([]string(nil), names...)
		sort.Strings(s)
		return strings.Join(s, " ")
	}
	postfix := map[string]string{
		"connect": "milter_connect_macros", "mail": "milter_mail_macros",
		"rcpt": "milter_rcpt_macros", "eom": "milter_end_of_data_macros",
	}
	mainCF := readFile(t, "postfix/main.cf")
	for stage, param := range postfix {
		m := regexp.MustCompile(`(?m)^` + param + ` = (.*)$`).FindStringSubmatch(mainCF)
		if m == nil {
			t.Errorf("postfix/main.cf lacks %s", param)
			continue
		}
		if got := set(strings.Fields(m[1])); got != set(want[stage]) {
			t.Errorf("postfix/main.cf %s = %q, the milter asks for %q", param, got, set(want[stage]))
		}
	}
	sendmail := map[string]string{
		"connect": "CONNECT", "mail": "ENVFROM", "rcpt": "ENVRCPT", "eom": "EOM",
	}
	mc := readFile(t, "sendmail/bulkmilter.mc")
	for stage, name := range sendmail {
		m := regexp.MustCompile("define\\(`confMILTER_MACROS_" + name + "', `([^']*)'\\)").FindStringSubmatch(mc)
		if m == nil {
			t.Errorf("sendmail/bulkmilter.mc lacks confMILTER_MACROS_%s", name)
			continue
		}
		var got []string
		for _, f := range strings.Split(m[1], ",") {
			got = append(got, strings.TrimSpace(f))
		}
		if set(got) != set(want[stage]) {
			t.Errorf("sendmail/bulkmilter.mc confMILTER_MACROS_%s = %q, the milter asks for %q", name, set(got), set(want[stage]))
		}
	}
	// HELO and the end of the header are not sent to the milter
	// (milter.protocol): no macros are listed for them.
	for _, unsent := range []string{"milter_helo_macros", "milter_end_of_header_macros", "confMILTER_MACROS_HELO", "confMILTER_MACROS_EOH"} {
		if strings.Contains(mainCF, unsent) || strings.Contains(mc, unsent) {
			t.Errorf("a snippet lists %s, for an event the milter is not sent", unsent)
		}
	}
	for _, want := range []string{"milter_default_action = accept", "milter_protocol = 6", "non_smtpd_milters = $smtpd_milters"} {
		if !strings.Contains(mainCF, "\n"+want+"\n") {
			t.Errorf("postfix/main.cf lacks %q", want)
		}
	}
}

// binaries are the repository's commands (cmd/NAME), each built once for
// all the tests of the package: the daemon the snippets run against, a
// real ExecStart for systemd-analyze, the -h of the commands the docs name.
var binaries = struct {
	sync.Mutex
	dir   string
	built map[string]string
}{built: map[string]string{}}

// binary builds cmd/NAME once and returns its path.
func binary(t *testing.T, name string) string {
	t.Helper()
	binaries.Lock()
	defer binaries.Unlock()
	if p, ok := binaries.built[name]; ok {
		return p
	}
	if binaries.dir == "" {
		dir, err := os.MkdirTemp("", "deploy-bin")
		if err != nil {
			t.Fatal(err)
		}
		binaries.dir = dir
	}
	p := filepath.Join(binaries.dir, name)
	if out, err := exec.Command("go", "build", "-o", p, "../cmd/"+name).CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	binaries.built[name] = p
	return p
}

func milterdBin(t *testing.T) string { return binary(t, "milterd") }

func TestMain(m *testing.M) {
	code := m.Run()
	if binaries.dir != "" {
		os.RemoveAll(binaries.dir)
	}
	os.Exit(code)
}

// The systemd unit passes systemd-analyze verify without a warning, and
// its offline security review rates it well (exposure at most 2.0 of 10).
func TestSystemdUnit(t *testing.T) {
	analyze := testenv.Program(t, "systemd-analyze")
	unit := readFile(t, "systemd/bulkmilter.service")
	for _, want := range []string{
		"User=bulkmilter", "RuntimeDirectory=bulkmilter", "StateDirectory=bulkmilter", "ProtectSystem=strict",
		"NoNewPrivileges=yes", "PrivateTmp=yes", "ProtectHome=yes", "CapabilityBoundingSet=\n",
		"ExecReload=/bin/kill -HUP $MAINPID", "Restart=on-failure",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("bulkmilter.service lacks %q", strings.TrimSpace(want))
		}
	}
	bin := milterdBin(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "bulkmilter.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/bin/milterd", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, dir, analyze, "verify", path)
	if err != nil || strings.Contains(out, "bulkmilter.service") {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = run(t, dir, analyze, "security", "--offline=true", path)
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for bulkmilter.service: ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	if level, _ := strconv.ParseFloat(m[1], 64); level > 2.0 {
		t.Errorf("exposure level %s, want at most 2.0:\n%s", m[1], out)
	}
	t.Logf("systemd-analyze security: exposure %s", m[1])

	// TimeoutStopSec must outlast the drain (shutdown_timeout, 30s default).
	stop := regexp.MustCompile(`(?m)^TimeoutStopSec=(\d+)s$`).FindStringSubmatch(unit)
	if stop == nil {
		t.Fatal("no TimeoutStopSec=Ns")
	}
	if n, _ := strconv.Atoi(stop[1]); n <= 30 {
		t.Errorf("TimeoutStopSec=%ss does not outlast the 30s drain", stop[1])
	}
}

// sysusers creates the system user and group and nothing else (no postfix
// user on a host without Postfix), and tmpfiles creates /etc/bulkmilter
// owned by it, in a scratch root.
func TestSysusersAndTmpfiles(t *testing.T) {
	sysusers := testenv.Program(t, "systemd-sysusers")
	tmpfiles := testenv.Program(t, "systemd-tmpfiles")
	testenv.RequireRoot(t, "systemd-tmpfiles --root sets owners")
	root := t.TempDir()
	for _, d := range []string{"etc", "usr/lib/sysusers.d", "usr/lib/tmpfiles.d"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A system without Postfix.
	writeRoot := func(rel, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(root, rel), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	writeRoot("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n", 0o644)
	writeRoot("etc/group", "root:x:0:\n", 0o644)
	writeRoot("etc/shadow", "root:*:19000:0:99999:7:::\n", 0o640)
	writeRoot("etc/gshadow", "root:*::\n", 0o640)
	writeRoot("usr/lib/sysusers.d/bulkmilter.conf", readFile(t, "systemd/bulkmilter.sysusers"), 0o644)
	writeRoot("usr/lib/tmpfiles.d/bulkmilter.conf", readFile(t, "systemd/bulkmilter.tmpfiles"), 0o644)
	if out, err := run(t, root, sysusers, "--root="+root, "bulkmilter.conf"); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	passwd, group := readFile(t, filepath.Join(root, "etc/passwd")), readFile(t, filepath.Join(root, "etc/group"))
	u := regexp.MustCompile(`(?m)^bulkmilter:x:(\d+):(\d+):[^:]*:/var/lib/bulkmilter:/usr/sbin/nologin$`).FindStringSubmatch(passwd)
	if u == nil {
		t.Fatalf("no bulkmilter system user:\n%s", passwd)
	}
	if uid, _ := strconv.Atoi(u[1]); uid >= 1000 || uid == 0 {
		t.Errorf("bulkmilter uid %d, want a system uid", uid)
	}
	if !regexp.MustCompile(`(?m)^bulkmilter:x:` + u[2] + `:$`).MatchString(group) {
		t.Errorf("group bulkmilter is missing or has members:\n%s", group)
	}
	if strings.Contains(passwd+group, "postfix") {
		t.Errorf("sysusers created a postfix user or group on a host without Postfix:\n%s\n%s", passwd, group)
	}
	if out, err := run(t, root, tmpfiles, "--root="+root, "--create", "bulkmilter.conf"); err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, out)
	}
	fi, err := os.Stat(filepath.Join(root, "etc/bulkmilter"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o750 {
		t.Errorf("/etc/bulkmilter mode %o, want 750", fi.Mode().Perm())
	}
	if gid := statGID(fi); strconv.Itoa(gid) != u[2] {
		t.Errorf("/etc/bulkmilter group %d, want bulkmilter (%s)", gid, u[2])
	}
}

func statGID(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Gid)
	}
	return -1
}

// The docs name only configuration keys that exist: every dotted key path
// in backquotes in README.md and docs/operations.md whose first part is a
// top-level key must be in the example configuration, the reference.
func TestDocsNameRealKeys(t *testing.T) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(readFile(t, "bulkmilter.yml")), &root); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, prefix)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if prefix != "" {
					p = prefix + "." + p
				}
				keys[p] = true
				walk(n.Content[i+1], p)
			}
		}
	}
	walk(&root, "")
	top := map[string]bool{}
	for k := range keys {
		if !strings.Contains(k, ".") {
			top[k] = true
		}
	}
	path := regexp.MustCompile("`([a-z_]+(?:\\.[a-z_*]+)+)")
	checked := 0
	for _, doc := range []string{"../README.md", "../docs/operations.md"} {
		for _, m := range path.FindAllStringSubmatch(readFile(t, doc), -1) {
			p := m[1]
			if !top[strings.Split(p, ".")[0]] {
				continue
			}
			checked++
			if prefix, ok := strings.CutSuffix(p, ".*"); ok {
				p = prefix
			}
			if !keys[p] {
				t.Errorf("%s names `%s`, which is not a key of deploy/bulkmilter.yml", doc, m[1])
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d key paths found in the docs; is the pattern right?", checked)
	}
}
