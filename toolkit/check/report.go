package check

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// WriteText prints one line per scenario (status, tier, id, reason), the
// offending transcript lines under each failure, and a summary line.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "acp-bridge check: %s\n", r.Agent)
	counts := map[Status]int{}
	for _, x := range r.Results {
		counts[x.Status]++
		reason := x.Reason
		if x.Expected {
			reason = "(expected by the baseline) " + reason
		}
		fmt.Fprintf(w, "%-7s  %-10s  %-18s  %s\n", x.Status, x.Tier, x.ID, reason)
		for _, l := range x.Transcript {
			fmt.Fprintf(w, "         | %s\n", l)
		}
		for _, l := range strings.Split(strings.TrimRight(x.Diagnostics, "\n"), "\n") {
			if l != "" {
				fmt.Fprintf(w, "         ! %s\n", l)
			}
		}
	}
	for _, id := range r.Stale {
		fmt.Fprintf(w, "stale baseline: %s passed but the baseline expects it to fail; remove it from the baseline\n", id)
	}
	verdict := "ok"
	switch {
	case r.Interrupted != "":
		verdict = "INTERRUPTED (" + r.Interrupted + "); the scenarios after the last line did not run"
	case len(r.Stale) > 0:
		verdict = "FAILED (the baseline is stale)"
	case r.Failed():
		var tiers []string
		for _, t := range r.failOn() {
			tiers = append(tiers, string(t))
		}
		verdict = "FAILED (a scenario of a failing tier, " + strings.Join(tiers, " or ") + ", failed or could not run)"
	}
	_, err := fmt.Fprintf(w, "%d passed, %d failed, %d skipped, %d not run: %s\n",
		counts[Pass], counts[Fail], counts[Skip], counts[NotRun], verdict)
	return err
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	out := struct {
		*Report
		Failed bool `json:"failed"`
	}{r, r.Failed()}
	return writeJSON(w, out)
}

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// JUnit shapes, as CI systems read them.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML: one testcase per scenario,
// classname the tier. A FAIL is a <failure>, a mandatory NOT RUN an
// <error>, SKIP and other NOT RUNs <skipped>.
func (r *Report) WriteJUnit(w io.Writer) error {
	s := junitSuite{Name: "acp-bridge check " + r.Agent}
	var total float64
	for _, x := range r.Results {
		c := junitCase{Name: x.ID, Classname: "acp." + string(x.Tier), Time: fmt.Sprintf("%.3f", x.Duration.Seconds())}
		total += x.Duration.Seconds()
		detail := strings.Join(x.Transcript, "\n")
		if x.Diagnostics != "" {
			detail += "\n" + x.Diagnostics
		}
		p := &junitProblem{Message: x.Reason, Text: detail}
		switch {
		case x.Status == Fail:
			p.Type = "FAIL"
			c.Failure = p
			s.Failures++
		case x.Status == NotRun && x.Tier == Mandatory:
			p.Type = "NOT RUN"
			c.Error = p
			s.Errors++
		case x.Status == NotRun || x.Status == Skip:
			c.Skipped = &junitProblem{Message: string(x.Status) + ": " + x.Reason}
			s.Skipped++
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
	}
	s.Time = fmt.Sprintf("%.3f", total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{s}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
