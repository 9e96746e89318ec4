package httpapi

import (
	"encoding/csv"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
)

// chart is a bar chart drawn by the server as inline SVG: one group of
// bars per label, one bar per series.
type chart struct {
	Title  string
	Unit   string
	Width  int
	Height int
	Bars   []bar
	Labels []axisLabel
	Legend []legend
	Max    string
	Empty  bool
}

type bar struct {
	X, Y, W, H float64
	Fill       string
	Title      string
}

type axisLabel struct {
	X    float64
	Text string
}

type legend struct{ Name, Fill string }

type series struct {
	Name, Fill string
	Values     []float64
}

// barChart lays out grouped bars of the series over labels, scaled to the
// largest value; a chart of zeros only is empty.
func barChart(title, unit string, labels []string, ss []series) chart {
	maxV := 0.0
	for _, s := range ss {
		for _, v := range s.Values {
			maxV = math.Max(maxV, v)
		}
	}
	return scaledChart(title, unit, labels, ss, maxV, maxV == 0)
}

// scaledChart lays out grouped bars of the series over labels on a scale
// of 0 to maxV (a percentage's is 100, whatever its values: a day of 0 %
// is drawn as such, not left out).
func scaledChart(title, unit string, labels []string, ss []series, maxV float64, empty bool) chart {
	const w, h, top, bottom, left, maxGroup = 640, 220, 10, 30, 40, 60
	c := chart{Title: title, Unit: unit, Width: w, Height: h}
	for _, s := range ss {
		c.Legend = append(c.Legend, legend{s.Name, s.Fill})
	}
	c.Empty = empty || maxV <= 0 || len(labels) == 0
	if c.Empty {
		return c
	}
	c.Max = strconv.FormatFloat(maxV, 'f', -1, 64) + unit
	// A group is at most maxGroup wide, so that one day is not a bar half
	// the chart wide; at most about a dozen labels fit under the axis.
	group := math.Min(float64(w-left)/float64(len(labels)), maxGroup)
	barW := group * 0.8 / float64(len(ss))
	every := (len(labels) + 11) / 12
	for i, l := range labels {
		x0 := float64(left) + float64(i)*group + group*0.1
		if i%every == 0 {
			c.Labels = append(c.Labels, axisLabel{X: x0 + group*0.4, Text: axisText(l)})
		}
		for j, s := range ss {
			v := 0.0
			if i < len(s.Values) {
				v = s.Values[i]
			}
			bh := v / maxV * float64(h-top-bottom)
			c.Bars = append(c.Bars, bar{X: x0 + float64(j)*barW, Y: float64(h-bottom) - bh, W: barW * 0.95, H: bh, Fill: s.Fill,
				Title: fmt.Sprintf("%s %s: %s%s", l, s.Name, strconv.FormatFloat(v, 'f', -1, 64), unit)})
		}
	}
	return c
}

// axisText is a label as the axis shows it: a day without its year.
func axisText(l string) string {
	if _, err := time.Parse(time.DateOnly, l); err == nil {
		return l[5:]
	}
	return l
}

// reportRange reads from and to (dates, YYYY-MM-DD) with the last 7 days
// as the default; to includes its day.
func reportRange(c echo.Context) (time.Time, time.Time, error) {
	now := time.Now().UTC()
	to := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	from := to.Add(-7 * 24 * time.Hour)
	if v := c.QueryParam("from"); v != "" {
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return from, to, invalid("from must be a date (YYYY-MM-DD)")
		}
		from = t
	}
	if v := c.QueryParam("to"); v != "" {
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return from, to, invalid("to must be a date (YYYY-MM-DD)")
		}
		to = t.Add(24 * time.Hour)
	}
	if !to.After(from) || to.Sub(from) > 366*24*time.Hour {
		return from, to, invalid("the range must be 1 to 366 days")
	}
	return from, to, nil
}

// everyDay is the report's rows for each day from from to to (excluded),
// a day without interrupts as a row of zeros: the charts show the days
// without data too.
func everyDay(from, to time.Time, rows []service.ReportRow) []service.ReportRow {
	byDay := make(map[string]service.ReportRow, len(rows))
	for _, r := range rows {
		byDay[r.Key] = r
	}
	var out []service.ReportRow
	for d := from; d.Before(to); d = d.Add(24 * time.Hour) {
		key := d.Format(time.DateOnly)
		r, ok := byDay[key]
		if !ok {
			r = service.ReportRow{Key: key}
		}
		out = append(out, r)
	}
	return out
}

func seconds(v *float64) float64 {
	if v == nil {
		return 0
	}
	return math.Round(*v*10) / 10
}

// dailyCharts are the charts of the figures per day.
func dailyCharts(days []service.ReportRow) []chart {
	var labels []string
	var approved, denied, rate, p50, p90 []float64
	decided := false
	for _, d := range days {
		decided = decided || d.Approved+d.Denied > 0
		labels = append(labels, d.Key)
		approved = append(approved, float64(d.Approved))
		denied = append(denied, float64(d.Denied))
		r := 0.0
		if d.Approved+d.Denied > 0 {
			r = math.Round(float64(d.Approved) / float64(d.Approved+d.Denied) * 100)
		}
		rate = append(rate, r)
		p50 = append(p50, seconds(d.DecisionP50))
		p90 = append(p90, seconds(d.DecisionP90))
	}
	return []chart{
		barChart("Decisions per day", "", labels, []series{{"approved", "#1b873f", approved}, {"denied", "#b00020", denied}}),
		scaledChart("Approval rate per day", "%", labels, []series{{"approved", "#3a6fd8", rate}}, 100, !decided),
		barChart("Time to decision per day", "s", labels, []series{{"p50", "#3a6fd8", p50}, {"p90", "#b7791f", p90}}),
	}
}

// uiReportDays is what the reports page and its CSV show: the chosen
// range [from, to) and the figures per day of it.
type uiReportDays struct {
	caller   service.Caller
	from, to time.Time
	days     []service.ReportRow
}

// reportDays resolves the dashboard's caller and the chosen range, and
// reads the figures per day of that range.
func (a *api) reportDays(c echo.Context) (r uiReportDays, err error) {
	if r.caller, err = a.uiCaller(c); err != nil {
		return r, err
	}
	if r.from, r.to, err = reportRange(c); err != nil {
		return r, err
	}
	r.days, err = a.inbox.ReportInterrupts(c.Request().Context(), r.caller, r.from, r.to, "day")
	return r, err
}

func (a *api) uiReports(c echo.Context) error {
	r, err := a.reportDays(c)
	if err != nil {
		return err
	}
	ctx, caller, from, to := c.Request().Context(), r.caller, r.from, r.to
	byAgent, err := a.inbox.ReportInterrupts(ctx, caller, from, to, "agent")
	if err != nil {
		return err
	}
	byTool, err := a.inbox.ReportInterrupts(ctx, caller, from, to, "tool")
	if err != nil {
		return err
	}
	pending, err := a.inbox.ListInterrupts(ctx, caller, service.InterruptFilter{Status: service.InterruptPending, Limit: 200})
	if err != nil {
		return err
	}
	buckets := []struct {
		name string
		max  time.Duration
	}{{"< 1h", time.Hour}, {"1-6h", 6 * time.Hour}, {"6-24h", 24 * time.Hour}, {"> 24h", math.MaxInt64}}
	ages := make([]float64, len(buckets))
	var ageLabels []string
	for _, b := range buckets {
		ageLabels = append(ageLabels, b.name)
	}
	for _, it := range pending {
		age := time.Since(it.CreatedAt)
		for i, b := range buckets {
			if age < b.max {
				ages[i]++
				break
			}
		}
	}
	charts := append(dailyCharts(everyDay(from, to, r.days)), barChart("Pending by age", "", ageLabels, []series{{"pending", "#b7791f", ages}}))
	return a.render(c, "reports.html", struct {
		page
		From, To        string
		Charts          []chart
		ByAgent, ByTool []service.ReportRow
	}{pageOf(c, "Reports", caller.TenantID), from.Format(time.DateOnly), to.Add(-24 * time.Hour).Format(time.DateOnly), charts, byAgent, byTool})
}

// uiReportsCSV answers the figures per day of the chosen range as CSV.
func (a *api) uiReportsCSV(c echo.Context) error {
	r, err := a.reportDays(c)
	if err != nil {
		return err
	}
	from, days := r.from, r.days
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="interrupts-`+from.Format(time.DateOnly)+`.csv"`)
	c.Response().WriteHeader(http.StatusOK)
	w := csv.NewWriter(c.Response())
	_ = w.Write([]string{"day", "total", "pending", "resolved", "expired", "approved", "denied", "decision_p50_seconds", "decision_p90_seconds"})
	f := func(v *float64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatFloat(*v, 'f', 1, 64)
	}
	for _, d := range days {
		_ = w.Write([]string{d.Key, strconv.FormatInt(d.Total, 10), strconv.FormatInt(d.Pending, 10), strconv.FormatInt(d.Resolved, 10),
			strconv.FormatInt(d.Expired, 10), strconv.FormatInt(d.Approved, 10), strconv.FormatInt(d.Denied, 10), f(d.DecisionP50), f(d.DecisionP90)})
	}
	w.Flush()
	return w.Error()
}
