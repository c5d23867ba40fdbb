// Package conversion serves the CRD conversion webhook (/convert) of Kueue's kinds that exist in
// several versions. It converts with upstream Kueue's own typed conversions, as
// controller-runtime's conversion handler does, and carries kueue-timeshare's fields
// (apis/kueue/v1beta2.Fields), which upstream's types lack, unchanged from the old version to
// the new: a ClusterQueue written through v1beta1 keeps its minAdmitDuration in v1beta2 and the
// other way round. Fields that neither upstream's type nor the list of ours knows are never
// dropped: the conversion fails, naming them.
package conversion

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	sigsjson "sigs.k8s.io/json"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

// Path is where the API server calls the webhook; the CRDs name it.
const Path = "/convert"

// Handler converts ConversionReviews. Scheme must hold every version of the converted kinds, one
// of them the conversion.Hub and the others conversion.Convertible, as Kueue's do.
type Handler struct {
	Scheme *runtime.Scheme
	// Fields are kueue-timeshare's fields by kind of Kueue's group, carried across every conversion.
	Fields map[string][]tsapi.Field
	Log    logr.Logger
}

// NewHandler converts with scheme's types and carries tsapi.Fields.
func NewHandler(scheme *runtime.Scheme, log logr.Logger) *Handler {
	return &Handler{Scheme: scheme, Fields: tsapi.Fields(), Log: log}
}

var _ http.Handler = (*Handler)(nil)

// ServeHTTP answers a ConversionReview with the same apiVersion it was sent in.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review apix.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		h.Log.Error(err, "Unreadable conversion review")
		http.Error(w, "unreadable ConversionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if review.Request == nil {
		http.Error(w, "ConversionReview without a request", http.StatusBadRequest)
		return
	}
	review.Response = h.Convert(review.Request)
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&review); err != nil {
		h.Log.Error(err, "Writing the conversion response")
	}
}

// Convert converts every object of req to req.DesiredAPIVersion, or fails the whole request with
// a message naming the object and the reason: the API server answers the client with it.
func (h *Handler) Convert(req *apix.ConversionRequest) (resp *apix.ConversionResponse) {
	resp = &apix.ConversionResponse{UID: req.UID}
	defer func() {
		if r := recover(); r != nil {
			h.Log.Error(fmt.Errorf("%v", r), "Panic while converting", "uid", req.UID)
			resp = &apix.ConversionResponse{UID: req.UID, Result: failure(errors.New("internal error while converting"))}
		}
	}()
	desired, err := schema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil {
		resp.Result = failure(fmt.Errorf("desiredAPIVersion: %w", err))
		return resp
	}
	resp.ConvertedObjects = make([]runtime.RawExtension, 0, len(req.Objects))
	for i := range req.Objects {
		out, err := h.convertObject(req.Objects[i].Raw, desired)
		if err != nil {
			h.Log.V(2).Info("Conversion refused", "uid", req.UID, "desiredAPIVersion", req.DesiredAPIVersion, "reason", err.Error())
			return &apix.ConversionResponse{UID: req.UID, Result: failure(err)}
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}

func failure(err error) metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
}

// carried is one of our fields' value, taken from the object before conversion.
type carried struct {
	field tsapi.Field
	value any
}

func (h *Handler) convertObject(raw []byte, desired schema.GroupVersion) ([]byte, error) {
	obj, err := decodeMap(raw)
	if err != nil {
		return nil, fmt.Errorf("object is not JSON: %w", err)
	}
	var typeMeta metav1.TypeMeta
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &typeMeta); err != nil {
		return nil, fmt.Errorf("object without apiVersion and kind: %w", err)
	}
	from := typeMeta.GroupVersionKind()
	name := describe(from.Kind, obj)
	if from.GroupVersion() == desired {
		return raw, nil
	}
	to := desired.WithKind(from.Kind)
	if from.GroupKind() != to.GroupKind() {
		return nil, fmt.Errorf("%s: cannot convert %s to group %s", name, from.GroupKind(), desired.Group)
	}

	// Take our fields out, so that what remains is exactly what upstream's type holds.
	var ours []carried
	var fields []tsapi.Field
	if from.Group == kueue.SchemeGroupVersion.Group {
		fields = h.Fields[from.Kind]
	}
	for _, f := range fields {
		v, found, err := take(obj, f.Path())
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, f, err)
		}
		if found {
			ours = append(ours, carried{field: f, value: v})
		}
	}
	rest, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	src, err := h.Scheme.New(from)
	if err != nil {
		return nil, fmt.Errorf("%s: %s is not a kind this manager converts: %w", name, from, err)
	}
	strict, err := sigsjson.UnmarshalStrict(rest, src)
	if err != nil {
		return nil, fmt.Errorf("%s: decoding %s: %w", name, from.Version, err)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("%s: not converted from %s to %s, it would lose data: %s", name, from.Version, desired.Version, strings.Join(msgs, "; "))
	}

	dst, err := h.Scheme.New(to)
	if err != nil {
		return nil, fmt.Errorf("%s: %s is not served by this manager: %w", name, to, err)
	}
	if err := h.convertTyped(src, dst); err != nil {
		return nil, fmt.Errorf("%s: converting %s to %s: %w", name, from.Version, desired.Version, err)
	}
	dst.GetObjectKind().SetGroupVersionKind(to)

	converted, err := json.Marshal(dst)
	if err != nil {
		return nil, err
	}
	if len(ours) == 0 {
		return converted, nil
	}
	out, err := decodeMap(converted)
	if err != nil {
		return nil, err
	}
	for _, c := range ours {
		if err := put(out, c.field.Path(), c.value); err != nil {
			return nil, fmt.Errorf("%s: %s cannot be kept in %s: %w", name, c.field, desired.Version, err)
		}
	}
	return json.Marshal(out)
}

// convertTyped converts between a hub and its spokes, or between two spokes through the hub, as
// controller-runtime's conversion webhook (convertObject, convertViaHub) does.
func (h *Handler) convertTyped(src, dst runtime.Object) error {
	srcHub, srcIsHub := src.(conversion.Hub)
	dstHub, dstIsHub := dst.(conversion.Hub)
	srcSpoke, srcIsSpoke := src.(conversion.Convertible)
	dstSpoke, dstIsSpoke := dst.(conversion.Convertible)
	switch {
	case srcIsHub && dstIsSpoke:
		return dstSpoke.ConvertFrom(srcHub)
	case dstIsHub && srcIsSpoke:
		return srcSpoke.ConvertTo(dstHub)
	case srcIsSpoke && dstIsSpoke:
		hub, err := h.hubOf(src)
		if err != nil {
			return err
		}
		if err := srcSpoke.ConvertTo(hub); err != nil {
			return err
		}
		return dstSpoke.ConvertFrom(hub)
	default:
		return fmt.Errorf("%T has no conversion to %T", src, dst)
	}
}

func (h *Handler) hubOf(obj runtime.Object) (conversion.Hub, error) {
	gvks, _, err := h.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return nil, fmt.Errorf("%T is not in the scheme", obj)
	}
	for gvk := range h.Scheme.AllKnownTypes() {
		if gvk.GroupKind() != gvks[0].GroupKind() {
			continue
		}
		o, err := h.Scheme.New(gvk)
		if err != nil {
			return nil, err
		}
		if hub, ok := o.(conversion.Hub); ok {
			return hub, nil
		}
	}
	return nil, fmt.Errorf("%s has no hub version", gvks[0].GroupKind())
}

// decodeMap keeps numbers as written, so that a carried value comes back unchanged.
func decodeMap(raw []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("null object")
	}
	return m, nil
}

// take removes and returns the value at path.
func take(obj map[string]any, path []string) (any, bool, error) {
	m := obj
	for i, name := range path[:len(path)-1] {
		next, ok := m[name]
		if !ok || next == nil {
			return nil, false, nil
		}
		if m, ok = next.(map[string]any); !ok {
			return nil, false, fmt.Errorf("%s is a %T, not an object", strings.Join(path[:i+1], "."), next)
		}
	}
	last := path[len(path)-1]
	v, ok := m[last]
	if ok {
		delete(m, last)
	}
	return v, ok, nil
}

// put sets the value at path, creating the objects that hold it.
func put(obj map[string]any, path []string, value any) error {
	m := obj
	for i, name := range path[:len(path)-1] {
		next, ok := m[name]
		if !ok || next == nil {
			child := map[string]any{}
			m[name] = child
			m = child
			continue
		}
		if m, ok = next.(map[string]any); !ok {
			return fmt.Errorf("%s is a %T, not an object", strings.Join(path[:i+1], "."), next)
		}
	}
	m[path[len(path)-1]] = value
	return nil
}

// describe names an object in messages: Kind "name" or Kind "namespace/name".
func describe(kind string, obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if ns, _ := meta["namespace"].(string); ns != "" {
		name = ns + "/" + name
	}
	if name == "" {
		return kind
	}
	return fmt.Sprintf("%s %q", kind, name)
}
