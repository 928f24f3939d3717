package container_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

type tarEntry struct {
	name, body string
	dir        bool
	mode       int64
}

func tarball(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if e.dir {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writeBlob stores b in the layout and returns its descriptor.
func writeBlob(t *testing.T, layout, mediaType string, b []byte) map[string]any {
	t.Helper()
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(layout, "blobs", "sha256", h), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return map[string]any{"mediaType": mediaType, "digest": "sha256:" + h, "size": len(b)}
}

// ociLayout builds an image of two layers: a gzip one with the payload
// and /etc/gone, and a zstd one that whites out /etc/gone and adds
// /etc/msg. Its tag is "v1".
func ociLayout(t *testing.T) string {
	layout, err := os.MkdirTemp(imageRoot, "layout-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(layout) })
	if err := os.MkdirAll(filepath.Join(layout, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	payload, err := os.ReadFile(filepath.Join(rootfs, "payload"))
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tarball(t, []tarEntry{
		{name: "proc", dir: true}, {name: "dev", dir: true}, {name: "sys", dir: true}, {name: "tmp", dir: true, mode: 0o1777},
		{name: "etc", dir: true}, {name: "etc/gone", body: "should be whited out\n"},
		{name: "payload", body: string(payload), mode: 0o755},
	}))
	zw.Close()
	var zs bytes.Buffer
	enc, _ := zstd.NewWriter(&zs)
	enc.Write(tarball(t, []tarEntry{{name: "etc/.wh.gone"}, {name: "etc/msg", body: "from layer two\n"}}))
	enc.Close()
	l1 := writeBlob(t, layout, "application/vnd.oci.image.layer.v1.tar+gzip", gz.Bytes())
	l2 := writeBlob(t, layout, "application/vnd.oci.image.layer.v1.tar+zstd", zs.Bytes())
	cfg := writeBlob(t, layout, "application/vnd.oci.image.config.v1+json", []byte(`{"architecture":"amd64","os":"linux"}`))
	m, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "config": cfg, "layers": []any{l1, l2}})
	md := writeBlob(t, layout, "application/vnd.oci.image.manifest.v1+json", m)
	md["annotations"] = map[string]string{"org.opencontainers.image.ref.name": "v1"}
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{md}})
	if err := os.WriteFile(filepath.Join(layout, "index.json"), idx, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(layout, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return layout
}

func TestOCILayoutImage(t *testing.T) {
	needRoot(t)
	layout := ociLayout(t)
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range []string{"oci-1", "oci-2"} {
		spec := pod(id, []string{"/payload", "cat", "/etc/msg", "cat", "/etc/gone"})
		spec.Containers[0].Image = api.Image{OCILayout: layout, Ref: "v1"}
		if err := rt.Start(ctx, spec); err != nil {
			t.Fatalf("Start: %v", err)
		}
		e, err := rt.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := rt.Logs(ctx, id, "c0", runtime.LogOptions{})
		b, _ := readAll(rc)
		if e.Code != 99 || !strings.HasPrefix(string(b), "from layer two\n") || !strings.Contains(string(b), "/etc/gone: no such file") {
			t.Errorf("%s: exit %+v, logs %q; want layer two's file and the whiteout in effect", id, e, b)
		}
		if err := rt.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
		if l := leftovers(dir, id); len(l) > 0 {
			t.Errorf("left behind %v", l)
		}
	}
	// Unpacked once, for both pods.
	if ents, _ := os.ReadDir(filepath.Join(dir, ".images")); len(ents) != 1 {
		t.Errorf("image cache holds %d entries, want 1", len(ents))
	}
	spec := pod("oci-bad", []string{"/payload"})
	spec.Containers[0].Image = api.Image{OCILayout: layout, Ref: "v2"}
	if err := rt.Start(ctx, spec); err == nil || !strings.Contains(err.Error(), "image.oci_layout") {
		t.Errorf("Start of an unknown ref = %v, want a bad spec naming image.oci_layout", err)
	}
}

func TestOCILayoutCorruptBlob(t *testing.T) {
	needRoot(t)
	layout := ociLayout(t)
	blobs, _ := filepath.Glob(filepath.Join(layout, "blobs", "sha256", "*"))
	corrupted := 0
	for _, b := range blobs {
		data, _ := os.ReadFile(b)
		if len(data) > 1000 { // a layer, not JSON
			data[len(data)/2] ^= 0xff
			if err := os.WriteFile(b, data, 0o644); err != nil {
				t.Fatal(err)
			}
			corrupted++
		}
	}
	if corrupted == 0 {
		t.Fatal("no layer blob found")
	}
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	defer rt.Close()
	spec := pod("oci-corrupt", []string{"/payload"})
	spec.Containers[0].Image = api.Image{OCILayout: layout, Ref: "v1"}
	if err := rt.Start(context.Background(), spec); err == nil {
		t.Fatal("Start with a corrupt layer succeeded")
	} else if !strings.Contains(err.Error(), "digest") && !strings.Contains(err.Error(), "gzip") && !strings.Contains(err.Error(), "zstd") && !strings.Contains(err.Error(), "tar") {
		t.Logf("error: %v", err)
	}
	if l := leftovers(dir, "oci-corrupt"); len(l) > 0 {
		t.Errorf("left behind %v", l)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, ".images")); len(ents) != 0 {
		t.Errorf("image cache holds %d entries after a failed unpack, want 0", len(ents))
	}
}
