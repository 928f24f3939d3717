package container

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// The parts of the OCI image layout and image specs the runtime reads.
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform,omitempty"`
}

type ociIndex struct {
	MediaType string          `json:"mediaType"`
	Manifests []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Layers    []ociDescriptor `json:"layers"`
}

const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	refAnnotation = "org.opencontainers.image.ref.name"
	// maxJSONBlob bounds an index or manifest blob.
	maxJSONBlob = 4 << 20
)

// errImage marks a problem with an image that the spec named: a missing
// layout or an unknown ref. Start reports it as a bad spec.
var errImage = errors.New("image")

// imageCache unpacks OCI layout images into root, once per manifest
// digest: root/<hex>/rootfs. An unpacked image is never changed, so pods
// share it (containers that write need a writable image; see
// ContainerSpec.ReadOnlyRootfs).
type imageCache struct {
	root string
	mu   sync.Mutex
	busy map[string]*sync.Mutex // per digest, guarded by mu
}

func (c *imageCache) lock(digest string) func() {
	c.mu.Lock()
	if c.busy == nil {
		c.busy = map[string]*sync.Mutex{}
	}
	m := c.busy[digest]
	if m == nil {
		m = &sync.Mutex{}
		c.busy[digest] = m
	}
	c.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// resolveManifest finds the manifest of ref (a tag, or a digest) in the
// layout, descending into nested indexes by this host's platform.
func resolveManifest(layout, ref string) (ociDescriptor, error) {
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		return ociDescriptor{}, fmt.Errorf("%w: %v", errImage, err)
	}
	var idx ociIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		return ociDescriptor{}, fmt.Errorf("%w: %s/index.json: %v", errImage, layout, err)
	}
	var found *ociDescriptor
	for i := range idx.Manifests {
		d := &idx.Manifests[i]
		if d.Annotations[refAnnotation] == ref || d.Digest == ref {
			found = d
			break
		}
	}
	if found == nil {
		return ociDescriptor{}, fmt.Errorf("%w: no image %q in %s", errImage, ref, layout)
	}
	for depth := 0; found.MediaType == mediaIndex; depth++ {
		if depth > 4 {
			return ociDescriptor{}, fmt.Errorf("%w: indexes nested too deep", errImage)
		}
		if err := readJSONBlob(layout, *found, &idx); err != nil {
			return ociDescriptor{}, err
		}
		found = nil
		for i := range idx.Manifests {
			d := &idx.Manifests[i]
			if d.Platform == nil || d.Platform.OS == "linux" && d.Platform.Architecture == goruntime.GOARCH {
				found = d
				break
			}
		}
		if found == nil {
			return ociDescriptor{}, fmt.Errorf("%w: %q has no linux/%s image", errImage, ref, goruntime.GOARCH)
		}
	}
	if found.MediaType != mediaManifest && found.MediaType != "" {
		return ociDescriptor{}, fmt.Errorf("%w: unsupported manifest type %q", errImage, found.MediaType)
	}
	return *found, nil
}

// blob opens the blob of d, verifying its digest as it is read.
func openBlob(layout string, d ociDescriptor) (*verifyReader, error) {
	alg, hexd, ok := strings.Cut(d.Digest, ":")
	if !ok || alg != "sha256" || len(hexd) != 64 || strings.Trim(hexd, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("unsupported digest %q", d.Digest)
	}
	f, err := os.Open(filepath.Join(layout, "blobs", alg, hexd))
	if err != nil {
		return nil, err
	}
	return &verifyReader{f: f, h: sha256.New(), want: hexd}, nil
}

// verifyReader hashes what it reads; at EOF it fails if the digest differs.
type verifyReader struct {
	f    *os.File
	h    hash.Hash
	want string
}

func (v *verifyReader) Read(p []byte) (int, error) {
	n, err := v.f.Read(p)
	v.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			return n, fmt.Errorf("blob sha256:%s has digest sha256:%s", v.want, got)
		}
	}
	return n, err
}

func (v *verifyReader) Close() error { return v.f.Close() }

func readJSONBlob(layout string, d ociDescriptor, v any) error {
	r, err := openBlob(layout, d)
	if err != nil {
		return err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxJSONBlob))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// rootfs returns the unpacked root filesystem of ref in layout, unpacking
// it first if this digest was never unpacked.
func (c *imageCache) rootfs(layout, ref string) (string, error) {
	md, err := resolveManifest(layout, ref)
	if err != nil {
		return "", err
	}
	_, hexd, _ := strings.Cut(md.Digest, ":")
	dir := filepath.Join(c.root, hexd)
	rootfs := filepath.Join(dir, "rootfs")
	unlock := c.lock(hexd)
	defer unlock()
	if _, err := os.Stat(rootfs); err == nil {
		return rootfs, nil
	}
	var m ociManifest
	if err := readJSONBlob(layout, md, &m); err != nil {
		return "", fmt.Errorf("manifest %s: %w", md.Digest, err)
	}
	if err := os.MkdirAll(c.root, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(c.root, hexd[:12]+".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	for _, l := range m.Layers {
		if err := applyLayer(layout, l, tmp); err != nil {
			return "", fmt.Errorf("layer %s: %w", l.Digest, err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, rootfs); err != nil {
		return "", err
	}
	return rootfs, nil
}

// applyLayer unpacks one layer onto root, applying its whiteouts.
func applyLayer(layout string, d ociDescriptor, root string) error {
	blob, err := openBlob(layout, d)
	if err != nil {
		return err
	}
	defer blob.Close()
	var r io.Reader = blob
	var decoder io.Closer // closed once, before the drain below
	switch {
	case strings.HasSuffix(d.MediaType, "+gzip") || strings.HasSuffix(d.MediaType, ".gzip"):
		zr, err := gzip.NewReader(blob)
		if err != nil {
			return err
		}
		r, decoder = zr, zr
	case strings.HasSuffix(d.MediaType, "+zstd") || strings.HasSuffix(d.MediaType, ".zstd"):
		// One goroutine-free decoder: the blob is read only here.
		zr, err := zstd.NewReader(blob, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return err
		}
		r, decoder = zr, zr.IOReadCloser()
	case strings.HasSuffix(d.MediaType, ".tar") || strings.HasSuffix(d.MediaType, "layer.v1.tar"):
	default:
		return fmt.Errorf("unsupported layer type %q", d.MediaType)
	}
	tr := tar.NewReader(r)
	closeDecoder := func() {
		if decoder != nil {
			_ = decoder.Close()
			decoder = nil
		}
	}
	defer closeDecoder()
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := applyEntry(root, h, tr); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	// Drain to the end, so that the digest is checked, after the decoder
	// has stopped reading.
	_, err = io.Copy(io.Discard, r)
	closeDecoder()
	if err == nil {
		_, err = io.Copy(io.Discard, blob)
	}
	return err
}

func applyEntry(root string, h *tar.Header, r io.Reader) error {
	name := filepath.Clean("/" + h.Name)
	if name == "/" {
		return nil
	}
	dirName, base := filepath.Split(name)
	// The parent resolved within root: symlinks cannot lead out.
	parent, err := securejoin.SecureJoin(root, dirName)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	if base == ".wh..wh..opq" {
		ents, err := os.ReadDir(parent)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	if gone, ok := strings.CutPrefix(base, ".wh."); ok {
		return os.RemoveAll(filepath.Join(parent, gone))
	}
	path := filepath.Join(parent, base)
	if h.Typeflag != tar.TypeDir {
		if err := os.RemoveAll(path); err != nil {
			return err
		}
	}
	mode := uint32(h.Mode & 0o7777)
	switch h.Typeflag {
	case tar.TypeDir:
		if st, err := os.Lstat(path); err == nil && !st.IsDir() {
			if err := os.Remove(path); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(path, 0o755); err != nil {
			return err
		}
	case tar.TypeReg:
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		return lchown(os.Symlink(h.Linkname, path), path, h)
	case tar.TypeLink:
		target, err := securejoin.SecureJoin(root, filepath.Clean("/"+h.Linkname))
		if err != nil {
			return err
		}
		return os.Link(target, path)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		kind := map[byte]uint32{tar.TypeChar: unix.S_IFCHR, tar.TypeBlock: unix.S_IFBLK, tar.TypeFifo: unix.S_IFIFO}[h.Typeflag]
		if err := unix.Mknod(path, kind|mode, int(unix.Mkdev(uint32(h.Devmajor), uint32(h.Devminor)))); err != nil {
			return err
		}
	default:
		return nil // other entry types (for example PAX globals) carry no file
	}
	if err := lchown(nil, path, h); err != nil {
		return err
	}
	return os.Chmod(path, os.FileMode(mode&0o777)|modeBits(mode))
}

func lchown(err error, path string, h *tar.Header) error {
	if err != nil {
		return err
	}
	return os.Lchown(path, h.Uid, h.Gid)
}

// modeBits converts setuid, setgid and sticky bits to os.FileMode.
func modeBits(m uint32) os.FileMode {
	var fm os.FileMode
	if m&unix.S_ISUID != 0 {
		fm |= os.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		fm |= os.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		fm |= os.ModeSticky
	}
	return fm
}

// overlayDir holds, in a pod's state directory, one directory per
// container of an OCI image: its overlay's upper, work and merged dirs.
const overlayDir = "rootfs"

// mountOverlay mounts a writable view of the unpacked image lower for
// container name of the pod in podDir, and returns its path. The
// container's writes go to the pod's state directory, never to the cache.
func mountOverlay(podDir, name, lower string) (string, error) {
	base := filepath.Join(podDir, overlayDir, name)
	upper, work, merged := filepath.Join(base, "upper"), filepath.Join(base, "work"), filepath.Join(base, "merged")
	for _, d := range []string{upper, work, merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	data := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_NODEV, data); err != nil {
		return "", fmt.Errorf("mount overlay: %w", err)
	}
	return merged, nil
}

// unmountOverlays unmounts the overlays of the pod in podDir.
func unmountOverlays(podDir string) error {
	merged, _ := filepath.Glob(filepath.Join(podDir, overlayDir, "*", "merged"))
	var errs []error
	for _, m := range merged {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}
