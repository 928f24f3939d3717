package ui

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/sluicehq/sluice/api"
	"github.com/valyala/fasthttp"
)

//go:embed templates/*.html
var templates embed.FS

//go:embed static
var static embed.FS

// securityHeaders go with every answer: scripts, styles and connections
// from this origin alone (no inline script, which keeps an injected tag
// from running), no framing, no referrer carrying a page's path away.
var securityHeaders = [][2]string{
	{"Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"},
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
	{"Referrer-Policy", "no-referrer"},
}

// page is one page of the UI: its template and the path segment after
// its prefix, when it takes one (a job's ID, a node's name).
type page struct {
	name, title string
	// prefix is the page's path under api.PathUI; with arg, the page is
	// prefix + "/" + one segment, or with slashes, + the rest of the path
	// (a task's ID has slashes).
	prefix       string
	arg, slashes bool
}

var pages = []page{
	{name: "overview", title: "Overview", prefix: ""},
	{name: "jobs", title: "Jobs", prefix: "jobs"},
	{name: "job", title: "Job", prefix: "jobs", arg: true},
	{name: "nodes", title: "Nodes", prefix: "nodes"},
	{name: "node", title: "Node", prefix: "nodes", arg: true},
	{name: "capboxes", title: "Capboxes", prefix: "capboxes", arg: true},
	{name: "queues", title: "Queues", prefix: "queues"},
	{name: "rounds", title: "Rounds", prefix: "rounds"},
	{name: "log", title: "Log", prefix: "logs", arg: true, slashes: true},
}

// Handler serves the UI. It is immutable and safe for concurrent use.
type Handler struct {
	tmpl map[string]*template.Template
	// assets are the static files by their path under api.PathUI.
	assets map[string][]byte
}

// New parses the embedded templates and reads the static files.
func New() (*Handler, error) {
	layout, err := template.ParseFS(templates, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("ui: %w", err)
	}
	h := &Handler{tmpl: map[string]*template.Template{}, assets: map[string][]byte{}}
	for _, p := range append(pages, page{name: "notfound", title: "Not found"}) {
		t, err := layout.Clone()
		if err == nil {
			t, err = t.ParseFS(templates, "templates/"+p.name+".html")
		}
		if err != nil {
			return nil, fmt.Errorf("ui: page %s: %w", p.name, err)
		}
		h.tmpl[p.name] = t
	}
	err = fs.WalkDir(static, "static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(name)
		h.assets[name] = b
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ui: %w", err)
	}
	return h, nil
}

// data is what a page's template gets.
type data struct {
	Page, Title string
	// Arg is the page's path segment (a job's ID, a node's name).
	Arg string
	// API holds the API's paths, for the scripts.
	API apiPaths
}

type apiPaths struct {
	Jobs, Job, Tasks, Nodes, Node, Queues, Watch, Cluster, Whoami, UI string
}

var paths = apiPaths{Jobs: api.PathJobs, Job: api.PathJob, Tasks: api.PathTasks, Nodes: api.PathNodes, Node: api.PathNode,
	Queues: api.PathQueues, Watch: api.PathWatch, Cluster: api.PathCluster, Whoami: api.PathWhoami, UI: api.PathUI}

// Serve answers a GET of a path under api.PathUI (or api.PathUI without
// its slash, which it redirects to api.PathUI): a page's HTML shell, a
// static file, or a 404 page.
func (h *Handler) Serve(ctx *fasthttp.RequestCtx) {
	for _, kv := range securityHeaders {
		ctx.Response.Header.Set(kv[0], kv[1])
	}
	full := string(ctx.Path())
	rest, ok := strings.CutPrefix(full, api.PathUI)
	if !ok {
		ctx.Redirect(api.PathUI, fasthttp.StatusMovedPermanently)
		return
	}
	if name, ok := strings.CutPrefix(rest, "static/"); ok {
		b, found := h.assets["static/"+name]
		if !found {
			h.render(ctx, fasthttp.StatusNotFound, "notfound", "")
			return
		}
		ct := mime.TypeByExtension(path.Ext(name))
		if ct == "" {
			ct = "application/octet-stream"
		}
		ctx.SetContentType(ct)
		// The files change with the binary: a browser checks before it
		// uses its copy.
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		ctx.SetBody(b)
		return
	}
	prefix, arg, hasArg := strings.Cut(rest, "/")
	for _, p := range pages {
		if p.prefix == prefix && p.arg == hasArg && (!hasArg || arg != "" && (p.slashes || !strings.Contains(arg, "/"))) {
			h.render(ctx, fasthttp.StatusOK, p.name, arg)
			return
		}
	}
	h.render(ctx, fasthttp.StatusNotFound, "notfound", "")
}

func (h *Handler) render(ctx *fasthttp.RequestCtx, status int, name, arg string) {
	title := "Not found"
	for _, p := range pages {
		if p.name == name {
			title = p.title
		}
	}
	if arg != "" {
		title += " " + arg
	}
	var buf bytes.Buffer
	if err := h.tmpl[name].ExecuteTemplate(&buf, "layout", data{Page: name, Title: title, Arg: arg, API: paths}); err != nil {
		ctx.Error("ui: rendering the page failed", fasthttp.StatusInternalServerError)
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(buf.Bytes())
}
